// The operator page's view of GET /api/runs and GET /api/runs/:id (JSON: dates are strings).

export interface OpsRun {
  id: string;
  threadId: string;
  ownerId: string;
  turnNo: number;
  status: string;
  owner: string | null;
  fence: number;
  attempts: number;
  leaseExpiresAt: string | null;
  effects: number;
  updatedAt: string;
}

export interface OpsEffect {
  key: string;
  status: string;
  fence: number;
  tool: string;
  input: unknown;
  result: unknown;
}

export interface OpsRunDetail {
  run: OpsRun & { takenOverBy: string | null; cancelRequestedAt: string | null };
  effects: OpsEffect[];
}
