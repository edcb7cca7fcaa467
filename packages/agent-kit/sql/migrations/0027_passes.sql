-- When did a drain or a reaper last look at the store, and who was it? `agent-kit status` said
-- that a lease had waited too long for a reaper, but not whether any reaper was running at all:
-- on a serverless deployment, a cron that was never set up looks the same as a quiet store.
--
-- One row per kind, overwritten: the table never grows, and a pass's write is a HOT update (no
-- index but the key's, which does not change). Each process writes at most once per ten seconds
-- per kind (the library throttles it), so many workers do not queue on these two rows. The time
-- is the database's clock, as every age in the status is (ADR-0055).

create table agent_kit_passes (
  kind text primary key check (kind in ('drain', 'reap')),
  at timestamptz not null,
  owner text not null
);
