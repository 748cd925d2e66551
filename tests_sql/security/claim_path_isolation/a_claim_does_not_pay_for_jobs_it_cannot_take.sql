-- The claim-cost attack: another tenant enqueues 20,000 jobs that cannot run now, each at a priority of
-- its own above the victim's: dated 'infinity', in the queue it paused for itself, held back by its
-- key's cap, or waiting on a dependency. The victim's claims cost what they cost without them
-- (buffers and index rows read, counted, not timed): those jobs are parked or out of the claim index,
-- and a paused tenant is left out of the claim. (Rows locked by another transaction: the pytest
-- tests_py/integration/test_a_claim_steps_over_few_locked_rows.py.)
BEGIN;
SELECT plan(8);

-- shared buffers (hit + read) and index rows a claim of queue 1 touches, function body included
CREATE FUNCTION pg_temp.claim_cost(OUT buffers integer, OUT rows_read bigint) LANGUAGE plpgsql AS $f$
DECLARE
    v_plan json;
    v_before bigint := (SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass);
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker.broker_get(1, NULL, 60, 1)' INTO v_plan;
    buffers := (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::integer + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::integer;
    rows_read := (SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass) - v_before;
END $f$;

-- the victim: ready jobs at priority 0
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str)
SELECT 'victim', 'v ' || i, 'v', 'SELECT 1' FROM generate_series(1, 200) AS i;
-- the attacker's one ready job, so that it is a tenant of the queue
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str) VALUES ('attacker', 'a ready', 'a', 'SELECT 1');
SELECT count(*) FROM (SELECT pg_temp.claim_cost() FROM generate_series(1, 6)) AS x;   -- warm caches and plans
CREATE TEMP TABLE quiet AS   -- (the least of 5)
SELECT min(c.buffers) AS buffers, min(c.rows_read) AS rows_read FROM generate_series(1, 5), LATERAL pg_temp.claim_cost() AS c;

-- 20,000 dated 'infinity'
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, run_after)
SELECT 'attacker', 'a later ' || i, 'a', 'SELECT 1', 1000 + i, 'infinity' FROM generate_series(1, 20000) AS i;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'attacker' AND parked = 1), 20000::bigint,
          'the 20,000 dated infinity are parked');
-- 20,000 waiting on a job that runs
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, pending_deps)
SELECT 'attacker', 'a blocked ' || i, 'a', 'SELECT 1', 30000 + i, 1 FROM generate_series(1, 20000) AS i;
-- 20,000 held back by the cap of their key: one of them is claimed, the next claims park the rest
INSERT INTO broker.broker_key_limit (tenant_id, concurrency_key, max_running) VALUES ('attacker', 'one', 1);
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, concurrency_key)
SELECT 'attacker', 'a capped ' || i, 'a', 'SELECT 1', 60000 + i, 'one' FROM generate_series(1, 20000) AS i;
SELECT is((SELECT count(*) FROM broker.broker_get(1, NULL, 60, 2) WHERE tenant_id = 'attacker'), 1::bigint,
          'a claim takes one job of the capped key');
SELECT count(*) FROM broker.broker_get(1, NULL, 60, 4);   -- (two for each tenant)
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE concurrency_key = 'one' AND parked = 2), 2000::bigint,
          'each claim that meets the key at its cap parks 1,000 of its others, the first in claim order');
SELECT count(*) FROM (SELECT broker.broker_get(1, NULL, 60, 4) FROM generate_series(1, 20)) AS x;   -- (the rest of them)
-- 20,000 in the same queue, paused for the attacker only
INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (1, 'attacker');
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority)
SELECT 'attacker', 'a paused ' || i, 'a', 'SELECT 1', 90000 + i FROM generate_series(1, 20000) AS i;

SELECT count(*) FROM (SELECT pg_temp.claim_cost() FROM generate_series(1, 6)) AS x;
CREATE TEMP TABLE busy AS    -- (the most of 5)
SELECT max(c.buffers) AS buffers, max(c.rows_read) AS rows_read FROM generate_series(1, 5), LATERAL pg_temp.claim_cost() AS c;
SELECT is((SELECT count(*) FROM broker.broker_get(1, NULL, 60, 5) WHERE tenant_id = 'victim'), 5::bigint,
          'the victim''s claims take its own jobs');
SELECT cmp_ok((SELECT buffers FROM busy), '<=', (SELECT 2 * buffers FROM quiet),
              format('the victim''s claim touches at most twice the buffers it did without them (%s, %s)',
                     (SELECT buffers FROM busy), (SELECT buffers FROM quiet)));
SELECT cmp_ok((SELECT rows_read FROM busy), '<=', (SELECT 2 * rows_read FROM quiet),
              format('and fetches at most twice the rows through indexes (%s, %s)', (SELECT rows_read FROM busy), (SELECT rows_read FROM quiet)));
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'attacker' AND complete_status = 1
            AND concurrency_key = 'one'), 1::bigint, 'one job of the capped key is claimed, never more');
SELECT ok((SELECT rows_read FROM quiet) > 0, 'the counts are live (the quiet claim fetched rows)');

SELECT * FROM finish();
ROLLBACK;
