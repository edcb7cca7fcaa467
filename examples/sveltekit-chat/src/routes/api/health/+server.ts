// Liveness probe: answers {ok: true} while the server process can handle requests.
// It deliberately touches no database, so a slow store never makes the process look dead.
import { json } from '@sveltejs/kit';
import type { RequestHandler } from './$types';

export const GET: RequestHandler = () => json({ ok: true });
