// The run row as selected from agent_kit_runs, and its mapping to the camel-case Run.
import { toNumber } from '../store/db.js';

export const runStatuses = [
  'queued', 'waiting_input', 'waiting_takeover', 'running', 'completed', 'failed', 'aborted',
] as const;
export type RunStatus = (typeof runStatuses)[number];
export const closedStatuses: readonly RunStatus[] = ['completed', 'failed', 'aborted'];

export interface RunRow {
  id: string;
  thread_id: string;
  turn_no: number;
  status: RunStatus;
  owner: string | null;
  fence: number | string;
  attempts: number;
  lease_expires_at: Date | null;
  deadline_at: Date | null;
  heartbeat_at: Date | null;
  partial: string;
  message_id: string | null;
  waiting_for: Record<string, unknown> | null;
  cancel_requested_at: Date | null;
  takeover_requested_at: Date | null;
  taken_over_by: string | null;
  last_error: Record<string, unknown> | null;
  superseded_by?: string | null;
  retry_due_at?: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface Run {
  id: string;
  threadId: string;
  turnNo: number;
  status: RunStatus;
  owner: string | null;
  fence: number;
  attempts: number;
  leaseExpiresAt: Date | null;
  deadlineAt: Date | null;
  heartbeatAt: Date | null;
  partial: string;
  messageId: string | null;
  waitingFor: Record<string, unknown> | null;
  cancelRequestedAt: Date | null;
  takeoverRequestedAt: Date | null;
  takenOverBy: string | null;
  /** The run that regenerated this turn's reply, replacing it (ADR-0091); null while it is part of the thread. */
  supersededBy: string | null;
  /** Parked for a model retry (ADR-0098): no claim takes it before then, unless to cancel it. */
  retryDueAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    threadId: row.thread_id,
    turnNo: toNumber(row.turn_no),
    status: row.status,
    owner: row.owner,
    fence: toNumber(row.fence),
    attempts: toNumber(row.attempts),
    leaseExpiresAt: row.lease_expires_at,
    deadlineAt: row.deadline_at,
    heartbeatAt: row.heartbeat_at,
    partial: row.partial,
    messageId: row.message_id,
    waitingFor: row.waiting_for,
    cancelRequestedAt: row.cancel_requested_at,
    takeoverRequestedAt: row.takeover_requested_at,
    takenOverBy: row.taken_over_by,
    supersededBy: row.superseded_by ?? null,
    retryDueAt: row.retry_due_at ?? null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function isClosed(status: RunStatus): boolean {
  return closedStatuses.includes(status);
}
