-- Listing threads sorted the whole table. A user's thread list (GET /api/threads, the chat app's
-- sidebar) and an operator's (?all) had no index to read from: with 200,000 threads, 20–45 ms
-- per list, a sequential scan and a sort, growing with every thread of every user.
--
-- Two indexes in the lists' own order. Threads are inserted once and their counter update
-- (last_seq) touches no indexed column, so appending events stays a HOT update.

create index agent_kit_threads__owner_id_created_at_idx on agent_kit_threads (owner_id, created_at desc, id);
create index agent_kit_threads__created_at_idx on agent_kit_threads (created_at desc, id);
