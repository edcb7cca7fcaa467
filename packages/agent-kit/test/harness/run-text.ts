// A run's text as the tests read it back: the final message, what was streamed (every text-delta
// joined) and what a viewer replaying the log shows (segment-started and model-retry set the
// text, ADR-0061; text-delta extends it). Shared by the tests of retries on every provider.
import type { Queryable } from '../../src/store/db.js';

/** The text of the run's final message, or undefined while it has none. */
export async function messageText(db: Queryable, runId: string): Promise<string | undefined> {
  const [message] = await db.query<{ text: string }>(
    `select m.content->>'text' as text from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [runId]);
  return message?.text;
}

async function textEvents(db: Queryable, runId: string) {
  return db.query<{ type: string; data: { text?: unknown } }>(
    `select type, data from agent_kit_thread_events
     where run_id = $1 and type in ('segment-started', 'model-retry', 'text-delta') order by seq`, [runId]);
}

/** Every text-delta of the run, joined: what viewers were streamed. */
export async function streamedText(db: Queryable, runId: string): Promise<string> {
  return (await textEvents(db, runId)).filter((e) => e.type === 'text-delta').map((e) => String(e.data.text ?? '')).join('');
}

/** The run's text as a viewer replaying its events shows it at the end. */
export async function shownText(db: Queryable, runId: string): Promise<string> {
  let shown = '';
  for (const { type, data } of await textEvents(db, runId)) {
    if (type === 'text-delta') shown += String(data.text ?? '');
    else if (typeof data.text === 'string') shown = data.text;
  }
  return shown;
}
