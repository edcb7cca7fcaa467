-- The SQL contract names the columns each table must have and lets the implementation add its
-- own. A caller that writes a row in plain SQL (a test from outside, an import, an operator's
-- repair) names only the contract's columns, so a column added here must not be required of it
-- (ADR-0073). Two were: agent_kit_runs.turn_no and agent_kit_effects.tool, both not null without
-- a default, so `insert into agent_kit_runs (thread_id) values (…)` failed.
--
-- A run's turn number orders the thread's runs: a run is claimed only when no earlier turn of its
-- thread is open, and a first claim reads the turns before its own. A run inserted without one is
-- numbered here as agent_kit_start_turn numbers it: the thread's next, under the thread row's
-- lock, so two inserts into one thread at once get 1 and 2, never the same number. The trigger
-- fires only for a row without a number: agent_kit_start_turn's inserts do not call it.
--
-- An effect recorded without its tool's name gets the empty name; the name is only shown.

create function agent_kit__number_turn() returns trigger language plpgsql as $$
begin
  perform 1 from agent_kit_threads t where t.id = new.thread_id for update;
  select coalesce(max(r.turn_no), 0) + 1 into new.turn_no from agent_kit_runs r where r.thread_id = new.thread_id;
  return new;
end $$;

create trigger agent_kit_runs__number_turn before insert on agent_kit_runs
  for each row when (new.turn_no is null) execute function agent_kit__number_turn();

alter table agent_kit_effects alter column tool set default '';
