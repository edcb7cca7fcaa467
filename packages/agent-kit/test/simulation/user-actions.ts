// The user's and the operator's side of a schedule, through the public SQL functions the HTTP
// routes call: answers (by the input route or a chat message; again, early, to a wrong question),
// cancels, takeovers and releases, and a chat request sent again while its turn waits out a
// retry. A refused call is an answer, not a crash; a second answer that is accepted is a violation.
import { startTurn } from '../../src/queue/start-turn.js';
import { hashFnv1a } from '../../src/model/scripted-reply.js';
import { isClosed, type RunSnapshot } from './invariants.js';
import type { Simulation } from './simulation.js';
import { action, duplicateSegment, type Candidate } from './spawn.js';
import { outsideWorkers } from './virtual-time.js';

/** Call one of the public SQL functions as the app would; an error is an answer, not a crash. */
async function callSql(sim: Simulation, sql: string, params: unknown[]): Promise<{ text: string; code?: string }> {
  await sim.scheduler.syncDbClock();
  sim.dirty = true;
  try {
    const rows = await sim.db.query<Record<string, unknown>>(sql, params);
    return { text: `→ ${JSON.stringify(Object.values(rows[0] ?? {})[0] ?? null)}` };
  } catch (raw) {
    const error = raw as Error & { code?: string };
    return { text: `→ ${error.name} ${error.code ?? ''}`.trim(), code: error.code };
  }
}

function answerData(sim: Simulation, run: RunSnapshot) {
  return run.waitingFor?.kind === 'approval' ? { approved: sim.user.chance(0.7) } : { answer: sim.user.pick(['blue', 'green']) };
}

export async function answer(sim: Simulation, run: RunSnapshot): Promise<string> {
  const questionId = run.waitingFor!.id!;
  const name = sim.names.of(run.id);
  if (sim.user.chance(0.3)) {
    // A message sent while the run waits is its answer (ADR-0001).
    const text = run.waitingFor?.kind === 'approval' ? sim.user.pick(['yes', 'no']) : 'blue please';
    await sim.scheduler.syncDbClock();
    sim.dirty = true;
    const turn = await outsideWorkers(() => startTurn(sim.db, { threadId: run.threadId, ownerId: 'u', text }));
    sim.answered.push({ runId: run.id, questionId });
    return `answer ${name} by message "${text}" → ${turn.kind}`;
  }
  const data = answerData(sim, run);
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status', [run.id, questionId, JSON.stringify(data)]);
  if (!result.code) sim.answered.push({ runId: run.id, questionId });
  return `answer ${name} ${JSON.stringify(data)} ${result.text}`;
}

async function answerAgain(sim: Simulation): Promise<string> {
  const { runId, questionId } = sim.user.pick(sim.answered);
  sim.count(sim.faults, 'answer-again');
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status', [runId, questionId, '{"answer":"again"}']);
  if (!result.code) sim.violations.push({ kind: 'duplicate-answer', detail: `${runId}: a second answer to ${questionId} was accepted` });
  return `answer ${sim.names.of(runId)} again ${result.text}`;
}

/** The question id the scripted model will ask with for this run (it is derived from the texts). */
async function expectedQuestionId(sim: Simulation, run: RunSnapshot): Promise<string> {
  const rows = await sim.db.query<{ text: string }>(
    `select (select m.content->>'text' from agent_kit_messages m where m.run_id = r.id and m.role = 'user'
             order by m.created_at limit 1) as text
     from agent_kit_runs r where r.thread_id = $1 and r.turn_no <= $2 and r.superseded_by is null order by r.turn_no`,
    [run.threadId, run.turnNo],
  );
  const hash = hashFnv1a(rows.map((r) => r.text).join('\u0000')).toString(16).padStart(8, '0');
  return `scripted-ask_user-${hash}`;
}

/** An answer that arrives while the run is still running: the right question, or a wrong one. */
async function answerEarly(sim: Simulation, run: RunSnapshot, wrong: boolean): Promise<string> {
  const questionId = wrong ? 'no-such-question' : await expectedQuestionId(sim, run);
  sim.count(sim.faults, wrong ? 'answer-wrong-question' : 'answer-early');
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status',
    [run.id, questionId, '{"answer":"early"}']);
  if (!result.code) sim.answered.push({ runId: run.id, questionId });
  return `answer ${sim.names.of(run.id)} early to ${wrong ? 'a wrong question' : 'its question'} ${result.text}`;
}

export async function operator(sim: Simulation, verb: 'cancel' | 'takeover' | 'release', run: RunSnapshot): Promise<string> {
  if (verb === 'cancel') return cancel(sim, run);
  const sql = {
    takeover: `select agent_kit_takeover_run($1, 'operator') as status`,
    release: 'select agent_kit_release_run($1) as status',
  }[verb];
  if (verb !== 'release') sim.count(sim.faults, verb);
  const result = await callSql(sim, sql, [run.id]);
  return `${verb} ${sim.names.of(run.id)} ${result.text}`;
}

/**
 * A cancel as the operator sends it (no seq), or as a stopped `useChat` page does: with the seq of
 * the last event it showed, somewhere in the latter half of the thread's log (ADR-0090). Drawn
 * from a stream of its own, so the other user choices of a seed stay as they were.
 */
async function cancel(sim: Simulation, run: RunSnapshot): Promise<string> {
  sim.count(sim.faults, 'cancel');
  const draw = sim.user.fork('cancel-seq');
  const where = draw.chance(0.5) ? 0.5 + 0.5 * draw.next() : null;
  const result = await callSql(sim, `select agent_kit_request_cancel($1,
    (select floor(t.last_seq * $2::float8)::bigint from agent_kit_threads t where t.id = $3)) as status`,
  [run.id, where, run.threadId]);
  return `cancel ${sim.names.of(run.id)}${where === null ? '' : ` shown ${(where * 100).toFixed(0)} %`} ${result.text}`;
}

/**
 * useChat's regenerate() of a closed turn's reply, or half of the time an edit of its message
 * (ADR-0091): a new run answers it, and it and the turns after it are superseded. Refused (AK004)
 * while a turn after it is under way. The edit is drawn from a stream of its own. The call names
 * the reply it replaces (ADR-0092), and is kept to be made again.
 */
async function regenerate(sim: Simulation, run: RunSnapshot): Promise<string> {
  sim.count(sim.faults, 'regenerate');
  const text = sim.user.fork('regenerate-edit').chance(0.5) ? `edited (message ${sim.turnsCreated})` : null;
  const [first] = await sim.db.query<{ id: string }>(
    `select m.id::text as id from agent_kit_messages m where m.run_id = $1 and m.role = 'user' order by m.created_at limit 1`, [run.id]);
  const call = { threadId: run.threadId, message: first?.id ?? '', text, replaces: run.id };
  const result = await regenerateCall(sim, call);
  const created = /^→ "(.+) created"$/.exec(result.text)?.[1];
  if (created) sim.regenerated.push({ ...call, runId: created, made: madeBy(sim, call, created) });
  return `${text ? 'edit and regenerate' : 'regenerate'} ${sim.names.of(run.id)} ${created ? `→ ${sim.names.of(created)}` : result.text}`;
}

type RegenerationCall = Omit<Simulation['regenerated'][number], 'runId' | 'made'>;

function regenerateCall(sim: Simulation, call: RegenerationCall) {
  return callSql(sim, `select r.run_id::text || case when r.created then ' created' else ' again' end as run
    from agent_kit_regenerate_turn($1, 'u', $2, '0', $3, $4) r`, [call.threadId, call.message, call.text, call.replaces]);
}

/**
 * A regeneration made again (a lost response, or a second page asking the same reply again): it
 * must return the run in the replaced reply's place, when this call made it, and write nothing,
 * or be refused (AK004) when another run holds that place. Usually that is the run the call made;
 * after restores it may be an earlier run of the same call, put back in that place (ADR-0096).
 * Another run is a violation, but when the reply it replaced is back in the conversation
 * (restored): then the same call is asked of it anew, as a user's next click on "Regenerate"
 * would be, and a new run answers it.
 */
async function regenerateAgain(sim: Simulation): Promise<string> {
  const first = sim.user.pick(sim.regenerated);
  sim.count(sim.faults, 'regenerate-again');
  const [replaces] = await sim.db.query<{ place: string | null }>(
    'select superseded_by::text as place from agent_kit_runs where id = $1', [first.replaces]);
  const place = replaces!.place;
  const result = await regenerateCall(sim, first);
  const created = /^→ "(.+) created"$/.exec(result.text)?.[1];
  if (created && place === null) {
    madeBy(sim, first, created);
  } else if (!result.code && !(place !== null && first.made.includes(place) && result.text === `→ "${place} again"`)) {
    sim.violations.push({ kind: 'duplicate-regeneration',
      detail: `replacing ${first.replaces} again gave ${result.text}; its place holds ${place}, the call made ${first.made.join(', ')}` });
  }
  const outcome = result.code ? result.text : `→ ${sim.names.of(created ?? first.runId)}${created ? ' (the reply was back: asked anew)' : ''}`;
  return `regenerate ${sim.names.of(first.replaces)} again ${outcome}`;
}

/**
 * A regeneration call made `runId`: every record of the same call stands for that run now (a call
 * made before, once its reply was restored, asks it anew) and shares the list of the runs it made,
 * and the reply it replaced is an earlier answer. Returns that list.
 */
function madeBy(sim: Simulation, call: RegenerationCall, runId: string): string[] {
  const same = sim.regenerated.filter((made) =>
    made.threadId === call.threadId && made.message === call.message && made.text === call.text && made.replaces === call.replaces);
  const made = same[0]?.made ?? [];
  made.push(runId);
  for (const record of same) {
    record.runId = runId;
    record.made = made;
  }
  sim.replaced.push(call.replaces);
  return made;
}

/**
 * The user's "Use this answer" (ADR-0096): put a superseded run's reply back in the conversation.
 * Mostly an answer a regeneration or a restore replaced; otherwise any superseded run, which is
 * refused (AK004) when it only followed a replaced reply, as it is while a turn is under way.
 */
async function restore(sim: Simulation, runs: RunSnapshot[]): Promise<string> {
  sim.count(sim.faults, 'restore');
  const draw = sim.user.fork('restore');
  const superseded = runs.filter((r) => r.superseded && isClosed(r.status));
  const replaced = superseded.filter((r) => sim.replaced.includes(r.id));
  const run = draw.pick(replaced.length && draw.chance(0.8) ? replaced : superseded);
  const result = await restoreCall(sim, run.id);
  if (result.replaced) sim.restored.push(run.id);
  return `restore ${sim.names.of(run.id)} ${result.replaced ? `in place of ${sim.names.of(result.replaced)}` : result.text}`;
}

/**
 * A restore, whose only refusal is a conflict (AK004): any other error is a violation. Returns the
 * run it put the restored one back in place of, which becomes an earlier answer in its turn.
 */
async function restoreCall(sim: Simulation, runId: string): Promise<{ text: string; replaced?: string }> {
  const result = await callSql(sim, `select case when r.restored then 'restored ' || r.superseded[1]::text else 'in place' end as outcome
    from agent_kit_restore_turn($1, 'u') r`, [runId]);
  if (result.code && result.code !== 'CONFLICT') sim.violations.push({ kind: 'restore-error', detail: `restoring ${runId} ${result.text}` });
  const replaced = /^→ "restored ([0-9a-f-]{36})"$/.exec(result.text)?.[1];
  if (replaced) sim.replaced.push(replaced);
  return { text: result.text, replaced };
}

/**
 * A restore made again (a lost response, a second tab): while the run is still in the conversation
 * it is answered "in place" and writes nothing; once it was replaced since, it is restored again.
 */
async function restoreAgain(sim: Simulation): Promise<string> {
  const runId = sim.user.pick(sim.restored);
  sim.count(sim.faults, 'restore-again');
  const state = () => sim.db.query<{ superseded: boolean; last_seq: string }>(
    `select r.superseded_by is not null as superseded, t.last_seq::text as last_seq
     from agent_kit_runs r join agent_kit_threads t on t.id = r.thread_id where r.id = $1`, [runId]);
  const [before] = await state();
  const result = await restoreCall(sim, runId);
  const [after] = await state();
  if (!before!.superseded && (result.text !== '→ "in place"' || after!.last_seq !== before!.last_seq)) {
    sim.violations.push({ kind: 'duplicate-restore',
      detail: `restoring ${runId} again while in place gave ${result.text}, last_seq ${before!.last_seq} → ${after!.last_seq}` });
  }
  return `restore ${sim.names.of(runId)} again ${result.replaced ? `in place of ${sim.names.of(result.replaced)}` : result.text}`;
}

export function userActions(sim: Simulation, runs: RunSnapshot[], chaos: number): Candidate[] {
  const candidates: Candidate[] = [];
  const open = runs.filter((r) => !isClosed(r.status));
  for (const run of runs.filter((r) => r.status === 'waiting_input' && r.waitingFor?.id).slice(0, 3)) {
    candidates.push([action('answer', () => answer(sim, run)), 1.5]);
  }
  if (sim.answered.length) candidates.push([action('answer-again', () => answerAgain(sim)), 0.1 * chaos]);
  const asking = runs.filter((r) => r.status === 'running' && !sim.answered.some((a) => a.runId === r.id));
  if (asking.length) {
    candidates.push([action('answer-early', () => answerEarly(sim, sim.pick.pick(asking), false)), 0.1 * chaos]);
    candidates.push([action('answer-wrong', () => answerEarly(sim, sim.pick.pick(asking), true)), 0.05 * chaos]);
  }
  if (open.length) {
    candidates.push([action('duplicate-segment', () => duplicateSegment(sim, sim.pick.pick(open))), 0.25 * chaos]);
    candidates.push([action('cancel', () => operator(sim, 'cancel', sim.pick.pick(open))), 0.04 * chaos]);
    candidates.push([action('takeover', () => operator(sim, 'takeover', sim.pick.pick(open))), 0.06 * chaos]);
  }
  // A chat request sent again while its turn waits out the model provider's Retry-After.
  const retrying = runs.filter((r) => r.status === 'queued' && !r.cancel && (r.retryDueAt?.getTime() ?? 0) > sim.scheduler.nowMs);
  if (retrying.length) {
    candidates.push([action('ask-during-retry', () => duplicateSegment(sim, sim.pick.pick(retrying), 'ask-during-retry')), 4]);
  }
  for (const run of runs.filter((r) => r.status === 'waiting_takeover' || (r.status === 'running' && r.takeover)).slice(0, 2)) {
    candidates.push([action('release', () => operator(sim, 'release', run)), 0.8]);
  }
  const replies = runs.filter((r) => isClosed(r.status) && !r.superseded);
  if (replies.length) candidates.push([action('regenerate', () => regenerate(sim, sim.pick.pick(replies))), 0.03 * chaos]);
  if (sim.regenerated.length) candidates.push([action('regenerate-again', () => regenerateAgain(sim)), 0.03 * chaos]);
  if (runs.some((r) => r.superseded && isClosed(r.status))) candidates.push([action('restore', () => restore(sim, runs)), 0.05 * chaos]);
  if (sim.restored.length) candidates.push([action('restore-again', () => restoreAgain(sim)), 0.02 * chaos]);
  return candidates;
}
