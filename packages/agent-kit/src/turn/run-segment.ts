// The turn engine: one segment of a run, under a fenced lease. It claims the run, reconciles what
// a dead segment left, rebuilds the conversation from the step journal, and runs steps until the
// turn ends, waits, slices at its deadline, or loses the lease — writing nothing after a loss.
import { asError, assert, StoreUnavailableError } from '../errors.js';
import { notifyThread } from '../store/notify-thread.js';
import { reconcileDeadEffects } from '../effect-ledger/index.js';
import {
  closeRun, failLease, parkQueued, parkRun, parkStartedLate, requestInput, retryStep,
} from '../lease/lease.js';
import { effectsInDoubt, salvageReason, salvageRun, spendNoMoreThan } from '../lease/salvage.js';
import {
  buildMessages, commitStep, committedText, hasReasoning, isTurnFinished, loadJournal, modelStepOf, pendingToolCalls,
  type StartedEffect, type Step,
} from './journal.js';
import { beginSegmentWithHistory, claimSegment, type Begun } from './segment-claim.js';
import { charsToShed, fitAfter, modelName, pastContextWindow, promptChars, type PromptFit } from './context-window.js';
import { fitKnownWindow, learnWindow } from './prompt-fit.js';
import { describeRefusal, refusedForGood, refusedWhatItCarried, StepPastBudgetError } from './model-retry.js';
import { runModelStep, type StepStop } from './model-step.js';
import { turnSettingsOf } from './settings.js';
import { addUsage, type TokenUsage } from '../event-log/token-usage.js';
import { holdUntil, renewOnTimer } from './lease-hold.js';
import { StreamMirror } from './stream-mirror.js';
import { nextEffectStart, settleToolCalls } from './tool-calls.js';
import { instructionsFor } from './runtime.js';
import { askedIn, askedOfRun, textShownAtCancel } from './reply-content.js';
import { afterStoreError, continuesAtLimit, continuesMidStep, parked, sliceDue, visibleText, waitToRetry, type Segment } from './segment.js';
import type { Runtime, SegmentOptions, SegmentOutcome } from './types.js';

/**
 * Run one segment of a run: claim it with the next fence and drive it as far as this invocation
 * may. Never throws for a lost lease or a failing provider; those are outcomes.
 */
export async function runSegment(rt: Runtime, options: SegmentOptions): Promise<SegmentOutcome> {
  const startedAtMs = options.preClaimed?.sentAtMs ?? Date.now();
  const budgetMs = options.budgetMs ?? rt.config.invocationBudgetMs;
  const leaseTtlMs = Math.min(options.leaseTtlMs ?? rt.config.leaseTtlMs, budgetMs);
  const settings = turnSettingsOf(rt, budgetMs);
  const claim = options.preClaimed?.claim
    ?? await claimSegment(rt.db, { runId: options.runId, owner: options.owner, leaseTtlMs, budgetMs, historyTurns: rt.historyTurns });
  if (!claim.claimed) return { kind: 'not-claimed', reason: claim.reason };
  assert(claim.lease.runId === options.runId && claim.lease.owner === options.owner, 'a segment runs the run it claimed, as its owner');
  const { lease, run } = claim;
  const controller = new AbortController();
  const mirror = new StreamMirror(rt.db, lease, settings.mirrorIntervalMs, (reason) => controller.abort(reason));
  // (Said apart from a refused renewal: a lease lost to this process's own stalls means a TTL too short for it.)
  const lapsed = () => rt.log?.({
    msg: 'lease ran out on this process\'s clock: no renewal landed in time', runId: lease.runId, fence: lease.fence, leaseTtlMs,
  });
  // Held on this process's clock whether or not it is renewed: a lease as long as the budget
  // ends at the budget's end, and a process frozen past it must not go on either (ADR-0105).
  const held = holdUntil(Date.now() - startedAtMs, leaseTtlMs, controller, lapsed, budgetMs);
  const stopRenewing = leaseTtlMs < budgetMs ? renewOnTimer(rt, lease, leaseTtlMs, controller, held) : async () => held.dispose();
  const segment: Segment = {
    rt, lease, run, settings, mirror, signal: controller.signal, options, budgetMs, startText: '', journal: [], interrupt: null, contextWindow: null,
    stopRenewing,
    // Local clock: started before the claim, so we stop no later than the database's deadline.
    stopAtMs: startedAtMs + budgetMs - settings.deadlineSafetyMs,
  };
  rt.log?.({ msg: 'segment claimed', runId: lease.runId, fence: lease.fence, attempt: lease.attempts });
  if (claim.begun) notifyThread(rt.db, lease.threadId, claim.begun.seq);
  try {
    return await driveSegment(segment, claim.begun);
  } catch (raw) {
    // The store's errors come mapped by its driver; anything else was thrown by the app's code (its
    // instructions, say), and a network code in it is about the app's own service, not the store.
    const error = asError(raw);
    rt.log?.({ msg: 'segment error', runId: lease.runId, fence: lease.fence, error: error.message, stack: error.stack });
    if (error instanceof StoreUnavailableError) return (await afterStoreError(segment, error)) ?? lost(segment);
    // (A failure that could not be written leaves the lease to run out, and the run to the reaper.)
    return await failSegment(segment, error).catch(() => ({ kind: 'stopped', fence: lease.fence, reason: error.message }));
  } finally {
    void stopRenewing(); // (which ends the local hold too, before its first await)
    mirror.dispose();
  }
}

/** `fresh`: the claim already began this (first) segment and read its history. */
async function driveSegment(s: Segment, fresh?: Begun): Promise<SegmentOutcome> {
  const { rt, lease } = s;
  // Every step and effect is written under the fence of the segment that wrote it, so the first
  // claim of a run (fence 1) has none to reconcile or replay: two reads saved per fresh turn.
  const resumed = lease.fence > 1;
  if (resumed) {
    // A hook gets no more than what is left of this segment (ADR-0041); one cut short by a lost
    // lease, or reached with no time left, stays `started` for the next segment.
    // An effect of a tool this process does not have (`agent-kit drain` taking over a run of an
    // app with tools of its own) is left for a process that has it, whose hook can confirm it, as
    // the reaper leaves it; unless the run ends here, below (given up, or cancelled).
    const settled = await reconcileDeadEffects(rt.db, lease, rt.tools, {
      timeoutMs: s.settings.reconcileTimeoutMs, signal: s.signal, stopAtMs: s.stopAtMs,
      maxResultBytes: s.settings.maxToolResultBytes,
      leaveUnregistered: lease.attempts <= rt.config.maxRunAttempts && !s.run.cancelRequestedAt,
    });
    if (settled === null || s.signal.reason === 'lost') return lost(s);
    if (settled.unregistered.length > 0) {
      const tools = settled.unregistered.join(', ');
      rt.log?.({
        msg: `a started effect of ${tools}, which this process does not have: left for a process that has the tool to reconcile`,
        runId: lease.runId, fence: lease.fence, attempt: lease.attempts,
      });
      return { kind: 'stopped', fence: lease.fence, reason: `a started effect of ${tools}, a tool this process does not have` };
    }
    if (settled.unsettled > 0) {
      return { kind: 'stopped', fence: lease.fence, reason: s.signal.aborted ? String(s.signal.reason) : 'deadline during reconcile' };
    }
  }
  const journal = resumed ? await loadJournal(rt.db, lease.runId) : [];
  s.journal = journal;
  // A cancel closes the run with the text its viewer saw, whatever the attempts spent: it asks
  // no model (a run parked for a retry at its last attempt was salvaged whole instead).
  const max = rt.config.maxRunAttempts;
  if (s.run.cancelRequestedAt) {
    // A claim past the crash budget only ends the run: it spends none of it (the run shows `max`).
    if (lease.attempts > max && !await spendNoMoreThan(rt.db, lease, max)) return lost(s);
    return closeCancelled(s, s.run.partial);
  }
  if (lease.attempts > max) {
    // The crash budget is spent (whoever enqueued this claim): give up here as the reaper would,
    // salvaging what viewers saw, with the attempts at the budget. Effects were reconciled above.
    const asked = await askedOfRun(rt.db, lease.runId, rt.tools);
    const messageId = await salvageRun(rt.db, lease, s.run.partial, salvageReason(max, max), asked, max);
    return messageId ? closed(s, 'aborted', messageId) : lost(s);
  }
  const model = typeof rt.model === 'function' ? rt.model(lease.runId) : rt.model;
  if (s.run.takeoverRequestedAt) return park(s, 'waiting_takeover');

  let prefix = continuationPrefix(s, journal, model);
  s.startText = committedText(journal) + prefix;
  let begun = fresh;
  if (!begun) {
    const data = { continued: prefix.length > 0, stepNo: journal.length };
    const next = await beginSegmentWithHistory(rt.db, lease, s.startText, data, s.run.turnNo, rt.historyTurns);
    if (!next) return lost(s);
    notifyThread(rt.db, lease.threadId, next.seq);
    begun = next;
  }
  s.contextWindow = begun.contextWindow; // what the thread knows of its model's context window (ADR-0069)
  const modelId = modelName(model);

  let started: StartedEffect | undefined; // the first tool call's effect, started by the step's commit
  let system: string | undefined; // the instructions, read before this segment's first model step
  let retries = 0; // of the current model step, refused by its provider for now
  let continued = 0; // requests of the current model step after its reply reached the output limit
  let earlierUsage: TokenUsage | undefined; // of those requests before the current one
  let fit: PromptFit = { history: begun.history, droppedResults: 0 }; // what the prompt leaves out to fit the context window
  let fittedStep = -1; // the step whose prompt was last fitted to the thread's known window
  // What this segment leaves the next one: steps it journalled, or text a model that continues a
  // prefill goes on from. A segment cut by its deadline with neither spends its attempt (ADR-0071).
  const stepsAtStart = journal.length;
  const progressed = () => journal.length > stepsAtStart || (continuesMidStep(s, model) && s.mirror.writtenText !== '' && !s.textDropped);
  s.progressed = progressed;
  for (;;) {
    if (pendingToolCalls(journal).length > 0) {
      const settled = await settleToolCalls(
        {
          db: rt.db, lease, tools: rt.tools, signal: s.signal, stopAtMs: s.stopAtMs,
          reconcileTimeoutMs: s.settings.reconcileTimeoutMs, maxResultBytes: s.settings.maxToolResultBytes,
          sliceDue: () => sliceDue(s), onUnrecorded: (effect) => (s.unrecordedEffect = effect),
        },
        journal, started, s.interrupt,
      );
      started = undefined;
      if (settled.kind === 'lost') return lost(s);
      if (settled.kind === 'stopped') return { kind: 'stopped', fence: lease.fence, reason: settled.reason };
      if (settled.kind === 'wait') return waitForInput(s, settled.waitingFor);
      if (settled.kind === 'slice') return slice(s);
      s.interrupt = settled.interrupt;
    }
    if (isTurnFinished(journal)) return honourInterrupt(s) ?? close(s, 'completed', { text: committedText(journal) });
    if (journal.filter((step) => step.kind === 'model').length >= s.settings.maxSteps) {
      return close(s, 'failed', { text: committedText(journal), error: `stopped after ${s.settings.maxSteps} model steps` });
    }
    const boundary = checkBoundary(s);
    if (boundary) return boundary;

    // One that throws fails the segment in runSegment's catch, as a model error does.
    system ??= await instructionsFor(rt, { runId: lease.runId, threadId: lease.threadId, turnNo: s.run.turnNo });
    // A thread whose model refused a prompt for its length before sends only what fits (ADR-0069),
    // checked at a step's first request: after a refusal the refusal's cut is the one asked.
    if (s.settings.fitContextWindow && fittedStep !== journal.length) {
      const fitted = await fitKnownWindow(s, { fit, journal, system, model: modelId, known: s.contextWindow });
      if (!fitted) return lost(s);
      [fit, fittedStep] = [fitted, journal.length];
    }
    const { droppedResults, resultCap } = fit;
    const messages = buildMessages(fit.history, journal, { reasoning: s.settings.sendReasoning, droppedResults, resultCap });
    const result = await runModelStep({
      model, system, messages, tools: rt.tools, prefix, mirror: s.mirror,
      segmentSignal: s.signal, stopAtMs: s.stopAtMs, stallTimeoutMs: s.settings.stallTimeoutMs,
      showReasoning: s.settings.showReasoning, stopSignal: s.options.stopSignal, stopGraceMs: s.settings.stopGraceMs,
    });
    if (result.kind === 'stopped') return handleStop(s, result.reason, progressed);
    if (result.kind === 'error') {
      const stopped = await s.mirror.flush();
      if (stopped) return handleStop(s, stopped, progressed);
      // A prompt past the model's context window is asked again at once without its oldest earlier
      // turns, then without the turn's oldest answered tool results, then with its newest cut (ADR-0067).
      const size = promptChars(system, messages);
      const tooLong = result.produced === 'nothing' && s.settings.fitContextWindow && pastContextWindow(result.error);
      const fitted = tooLong ? fitAfter(fit, journal, charsToShed(size, result.error)) : undefined;
      if (fitted) {
        // The thread learns the model's window for its later prompts (ADR-0069).
        const learnt = { model: modelId, system, refusedChars: size, error: result.error, next: fitted.fit, journal };
        if (!(await learnWindow(s, learnt))) return lost(s);
        rt.log?.({ msg: 'prompt past the context window', runId: lease.runId, fence: lease.fence, ...fitted.said });
        const data = { stepNo: journal.length, delayMs: 0, error: describeRefusal(result.error), ...fitted.said };
        if ((await retryStep(rt.db, lease, visibleText(s), data)) === null) return lost(s);
        fit = fitted.fit;
        continue;
      }
      // Asked again in this segment (ADR-0057). A model that continues a prefill goes on from
      // what it streamed, if that was only text (ADR-0059); otherwise the step starts again and
      // what it streamed is dropped, from the run's partial and from every viewer (ADR-0061).
      // A provider that rejects the prefill or the earlier reasoning the request carried is asked
      // without them, the step from its start when it had a prefill (ADR-0064).
      const refused = refusedWhatItCarried(result, { prefix, reasoning: s.settings.sendReasoning && hasReasoning(journal) });
      if (refused) s.settings = { ...s.settings, continueMidStep: false, sendReasoning: false };
      const dropsPrefill = refused && prefix.trim() !== '';
      const goesOn = !dropsPrefill && (result.produced === 'nothing' || (result.produced === 'text' && continuesMidStep(s, model)));
      const from = goesOn ? visibleText(s) : committedText(journal);
      const retry = await waitToRetry(s, result.error, ++retries, { stepNo: journal.length, from, redo: !goesOn, refused });
      if (retry === 'lost') return lost(s);
      // A request the provider rejects as invalid will be rejected again: the turn fails now (ADR-0066).
      if (retry === 'no') return refusedForGood(result.error) && !refused ? giveUp(s, result.error) : failSegment(s, result.error);
      if (retry === 'parked') return parked(s, 'queued');
      if (!goesOn) {
        s.startText = from;
        s.mirror.rebase();
        s.textDropped = false;
      }
      prefix = goesOn ? result.text : ''; // what was streamed of this step (the same prefix when nothing was)
      continue; // the same step again, after the boundary checks
    }
    const usage = addUsage(earlierUsage, result.usage);
    // A reply cut at the model's output limit goes on from its text in a request of its own, as a
    // step cut mid-stream does, when the model continues a prefill (ADR-0068).
    if (continuesAtLimit(s, model, result) && ++continued <= s.settings.continueAtOutputLimit) {
      const stopped = await s.mirror.flush();
      if (stopped) return handleStop(s, stopped, progressed);
      rt.log?.({ msg: 'reply at the output limit goes on', runId: lease.runId, fence: lease.fence, stepNo: journal.length, continued });
      [prefix, earlierUsage] = [result.text, usage];
      continue;
    }
    [prefix, retries, continued, earlierUsage] = ['', 0, 0, undefined];
    const taken = await s.mirror.takeForCommit();
    if ('stopped' in taken) return handleStop(s, taken.stopped, progressed);

    const { step, event } = modelStepOf(journal.length, { ...result, ...(usage ? { usage } : {}) });
    // A step without tool calls ends the turn: it is journalled and the run closed in one write.
    const ends = step.toolCalls.length === 0;
    // A step with tool calls starts the first call's effect in the same write (migration 0016),
    // unless too little time is left to run it: then the next segment starts it (ADR-0013).
    // A cancel or takeover the mirror's last write saw leaves the lease held: the finished step is
    // journalled all the same (closing nothing, starting no effect), so a released run does not
    // ask the model for it again, and then the interrupt is honoured.
    const committed = await commitStep(rt.db, lease, step, event, {
      delta: taken.delta,
      close: ends ? { status: 'completed', message: await withAsked(s, [...journal, step], { text: committedText([...journal, step]) }) } : undefined,
      start: ends || sliceDue(s) || taken.interrupt ? undefined : nextEffectStart(rt.tools, lease.runId, [...journal, step]),
    });
    if (!committed.ok) return lost(s);
    s.mirror.written(taken.delta);
    notifyThread(rt.db, lease.threadId, committed.seq);
    journal.push(step);
    started = committed.started;
    if (committed.messageId) return closed(s, 'completed', committed.messageId);
    // Not closed: the turn goes on, or a pending cancel/takeover kept the close (migration 0012).
    s.interrupt = committed.interrupt ?? taken.interrupt ?? null;
    if (taken.interrupt) return honourInterrupt(s)!;
  }
}

/** Mid-step continuation: the dead segment's mirrored text past the committed steps, if usable. */
function continuationPrefix(s: Segment, journal: Step[], model: unknown): string {
  if (!continuesMidStep(s, model)) return '';
  if (pendingToolCalls(journal).length > 0 || isTurnFinished(journal)) return '';
  const committed = committedText(journal);
  return s.run.partial.startsWith(committed) ? s.run.partial.slice(committed.length) : '';
}

/**
 * At a step boundary: slice when out of time or asked to stop; honour cancel and takeover as
 * the last guarded write reported them (it came just before this boundary).
 */
function checkBoundary(s: Segment): Promise<SegmentOutcome> | undefined {
  if (sliceDue(s)) return slice(s);
  return honourInterrupt(s);
}

/** A cancel closes the run aborted with the text so far; a takeover parks it for the operator. */
function honourInterrupt(s: Segment): Promise<SegmentOutcome> | undefined {
  if (s.interrupt === 'cancel') return closeCancelled(s, visibleText(s));
  if (s.interrupt === 'takeover') return park(s, 'waiting_takeover');
  return undefined;
}

/** `progressed`: whether the segment leaves the next one anything to go on from (asked after the mirror's last write). */
async function handleStop(s: Segment, reason: StepStop, progressed: () => boolean): Promise<SegmentOutcome> {
  switch (reason) {
    case 'lost':
      return lost(s);
    case 'cancel':
      return closeCancelled(s, visibleText(s));
    case 'takeover':
      return park(s, 'waiting_takeover');
    case 'store-error':
      s.rt.log?.({ msg: 'segment error', runId: s.lease.runId, fence: s.lease.fence, error: s.mirror.stopError?.message });
      return (await afterStoreError(s, s.mirror.stopError ?? new StoreUnavailableError('the store failed a write'))) ?? lost(s);
    case 'stop':
    case 'deadline': {
      // A mid-step cut after progress is a slice: the next segment goes on from the steps journalled
      // here, and with prefill from the mirrored text. One with none spends its attempt, unless the
      // process is going away (ADR-0117: not the run's failing) or the segment started late in its
      // invocation (ADR-0113): a whole budget would cut it the same (ADR-0071).
      const stopped = await s.mirror.flush();
      if (stopped) return handleStop(s, stopped, progressed);
      if (progressed()) return slice(s, reason === 'stop' ? 'stop' : 'slice');
      if (reason === 'stop') return (await parkStartedLate(s.rt.db, s.lease, 'stop')) ? parked(s, 'queued') : lost(s);
      if (s.budgetMs < (s.options.invocationBudgetMs ?? s.budgetMs) / 2) {
        s.rt.log?.({ msg: 'segment started too late to finish its step: run given back, attempt not spent', runId: s.lease.runId, fence: s.lease.fence, budgetMs: s.budgetMs });
        return (await parkStartedLate(s.rt.db, s.lease)) ? parked(s, 'queued') : lost(s); // ADR-0113
      }
      return failSegment(s, new StepPastBudgetError(s.budgetMs, s.mirror.writtenText !== ''));
    }
  }
}

async function waitForInput(s: Segment, waitingFor: Record<string, unknown>): Promise<SegmentOutcome> {
  if (!(await requestInput(s.rt.db, s.lease, waitingFor))) return lost(s);
  return parked(s, 'waiting_input');
}

async function park(s: Segment, status: 'waiting_takeover'): Promise<SegmentOutcome> {
  if (!(await parkRun(s.rt.db, s.lease, status))) return lost(s);
  return parked(s, status);
}

/** Hand the run on to its next segment: this one's time ran out (`slice`), or its process is stopping. */
async function slice(s: Segment, reason: 'slice' | 'stop' = s.options.stopSignal?.aborted ? 'stop' : 'slice'): Promise<SegmentOutcome> {
  if (!(await parkQueued(s.rt.db, s.lease, reason))) return lost(s);
  return parked(s, 'queued');
}

/** The run's status once parked (an answer or a takeover may already have moved it on). */
async function close(
  s: Segment, status: 'completed' | 'failed' | 'aborted', message: { text: string } & Record<string, unknown>,
): Promise<SegmentOutcome> {
  const messageId = await closeRun(s.rt.db, s.lease, status, await withAsked(s, s.journal, message));
  if (!messageId) return lost(s);
  return closed(s, status, messageId);
}

/** Close a cancelled run with the text its viewer had seen when the cancel named that (ADR-0090), else `text`. */
async function closeCancelled(s: Segment, text: string): Promise<SegmentOutcome> {
  const shown = await textShownAtCancel(s.rt.db, s.lease.runId, s.lease.threadId);
  // A resumed run's effects may be in doubt (its dead segment's, just reconciled): named, as a salvage names them.
  const inDoubt = s.lease.fence > 1 ? await effectsInDoubt(s.rt.db, s.lease.runId) : [];
  return close(s, 'aborted', { text: shown ?? text, cancelled: true, ...(inDoubt.length > 0 ? { inDoubt } : {}) });
}

/** The run's message with the questions it asked and the chat messages that answered them (ADR-0087). */
async function withAsked<M extends { text: string }>(s: Segment, journal: readonly Step[], message: M): Promise<M> {
  const asked = await askedIn(s.rt.db, s.lease.runId, journal, s.rt.tools);
  return asked.length > 0 ? { ...message, asked } : message;
}

function closed(s: Segment, status: 'completed' | 'failed' | 'aborted', messageId: string): SegmentOutcome {
  s.rt.log?.({ msg: 'run closed', runId: s.lease.runId, fence: s.lease.fence, status });
  return { kind: 'closed', status, messageId, fence: s.lease.fence };
}

/** Give the lease up at once with the error (the attempt stays spent), for the reaper to requeue. */
async function failSegment(s: Segment, error: Error): Promise<SegmentOutcome> {
  s.rt.log?.({ msg: 'segment failed', runId: s.lease.runId, fence: s.lease.fence, error: error.message });
  await s.stopRenewing();
  await s.mirror.flush();
  if (!await failLease(s.rt.db, s.lease, error)) return lost(s);
  notifyThread(s.rt.db, s.lease.threadId);
  return { kind: 'stopped', fence: s.lease.fence, reason: error.message };
}

/** Close the run as failed with the provider's refusal, its text so far kept as a salvage would. */
function giveUp(s: Segment, error: Error): Promise<SegmentOutcome> {
  s.rt.log?.({ msg: 'model refused the request for good', runId: s.lease.runId, fence: s.lease.fence, error: error.message });
  return close(s, 'failed', { text: visibleText(s), error: describeRefusal(error) });
}

function lost(s: Segment): SegmentOutcome {
  s.rt.log?.({ msg: 'lease lost', runId: s.lease.runId, fence: s.lease.fence });
  return { kind: 'lost', fence: s.lease.fence };
}
