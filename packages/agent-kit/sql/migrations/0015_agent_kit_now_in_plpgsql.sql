-- agent_kit_now() was a SQL function with a sub-select (the test clock). Postgres cannot inline
-- such a function, so every statement that called it planned its body again, at every call
-- site, on every execution: about 0.1 ms of planning per call site. agent_kit_renew_lease has
-- three and took 0.44 ms against 0.19 ms with now() (pgbench, one client). A PL/pgSQL body keeps
-- its plan for the session, so the clock now costs one cached index lookup. Same result, same
-- volatility: the test clock (agent_kit_clock) still moves every session's now.

create or replace function agent_kit_now() returns timestamptz language plpgsql stable as $$
declare
  v_fake timestamptz;
begin
  select fake_now into v_fake from agent_kit_clock where id;
  return coalesce(v_fake, now());
end $$;
