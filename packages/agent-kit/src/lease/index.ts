// Leases: claim, renew, mirror, park, close — the fence's only owners.
export * from './lease.js';
export * from './run-row.js';
export * from './salvage.js';
