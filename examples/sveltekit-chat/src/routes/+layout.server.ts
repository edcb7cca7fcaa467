// Every page learns who is signed in (or null), from the cookie hooks.server.ts verified.
import type { LayoutServerLoad } from './$types';

export const load: LayoutServerLoad = ({ locals }) => ({ user: locals.user });
