// The warning a command that runs turns prints when it would answer a real database's users with
// the offline scripted model because no model is set (an adopter's `agent-kit drain` did, quietly).
import { describe, expect, it } from 'vitest';
import { scriptedByDefaultWarning } from './with-runtime.js';

describe('scriptedByDefaultWarning', () => {
  it('warns for a real database with no model set, and only then', () => {
    const warning = scriptedByDefaultWarning({ DATABASE_URL: 'postgres://db/app' });
    expect(warning).toMatch(/^agent-kit: AGENT_KIT_MODEL is not set, so the turns this command runs are answered by the offline scripted model/);
    expect(warning).toMatch(/AGENT_KIT_MODEL=scripted to say you mean it/);
    expect(scriptedByDefaultWarning({ DATABASE_URL: 'postgres://db/app', AGENT_KIT_MODEL: '  ' })).toBe(warning);
    expect(scriptedByDefaultWarning({ DATABASE_URL: 'postgres://db/app', AGENT_KIT_MODEL: 'scripted' })).toBeNull();
    expect(scriptedByDefaultWarning({ DATABASE_URL: 'postgres://db/app', AGENT_KIT_MODEL: 'openai:gpt-4o-mini' })).toBeNull();
    expect(scriptedByDefaultWarning({})).toBeNull(); // the embedded demo store
  });
});
