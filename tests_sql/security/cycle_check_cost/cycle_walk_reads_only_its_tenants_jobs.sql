-- The cycle check walks only its own tenant's edges, index by index: the buffers its walk
-- up a 31-job chain (from its first job to the jobs waiting on it) and its look-up of the edges between the
-- jobs found touch do not grow with another tenant's unfinished jobs and edges (5,000, then 40,000), but for
-- an index a level deeper; and the walk is bounded (54000 beyond its documented size). (The edges were once
-- read by one pass over the edge index from its lowest id while the table was small: a cost that grows with
-- every tenant's edges, which this test, run in a fresh database, caught.)
BEGIN;
SELECT plan(5);

-- tenant_a: a chain L0 <- L1 <- ... <- L30, and a watcher of group top
SELECT broker.broker_set_tenant('tenant_a');
SELECT broker.broker_add_job('l0', 'SELECT 1', p_job_group => 'L0');
SELECT count(*) FROM (SELECT broker.broker_add_job('l' || i, 'SELECT 1', p_job_group => 'L' || i,
                                                   p_depends_on_groups => ARRAY['L' || (i - 1)])
                        FROM generate_series(1, 30) AS i) AS x;
SELECT broker.broker_add_job('watcher', 'SELECT 1', p_depends_on_groups => ARRAY['top']);
ANALYZE broker.broker_jobs;
ANALYZE broker.broker_job_dependency;

-- a job of group top that waits on L30; the walk from l0 goes up the whole chain to it and its watcher
SELECT broker.broker_add_job('top', 'SELECT 1', p_job_group => 'top', p_depends_on_groups => ARRAY['L30']);
SELECT set_config('test.top', (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'l0')::text, true);
-- buffers (hit + read) of that walk
CREATE FUNCTION pg_temp.walk_buffers() RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE v_plan json;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker._dependency_cycle(%L)',
                   ARRAY[current_setting('test.top')::bigint]) INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::integer + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::integer;
END $f$;
SELECT pg_temp.walk_buffers(), pg_temp.walk_buffers();   -- warm caches
SELECT pg_temp.walk_buffers() AS alone \gset

-- tenant_b: 5,000 unfinished jobs (delayed), each waiting on a group, then 40,000 (both
-- enough for every index to have the height it keeps: only what the walk reads differs)
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, run_after)
SELECT 'tenant_b', 'b' || i, 'B' || (i % 50), 'SELECT 1', now() + interval '1 day' FROM generate_series(1, 5000) AS i;
INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_group)
SELECT 'tenant_b', j.job_id, 'B waits' FROM broker.broker_jobs AS j WHERE j.tenant_id = 'tenant_b';
ANALYZE broker.broker_jobs;
ANALYZE broker.broker_job_dependency;
SELECT pg_temp.walk_buffers();   -- (planned again after ANALYZE: planning reads buffers too)
SELECT pg_temp.walk_buffers() AS crowded \gset
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, run_after)
SELECT 'tenant_b', 'b' || i, 'B' || (i % 50), 'SELECT 1', now() + interval '1 day' FROM generate_series(5001, 40000) AS i;
INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_group)
SELECT 'tenant_b', j.job_id, 'B waits' FROM broker.broker_jobs AS j
 WHERE j.tenant_id = 'tenant_b' AND j.job_name OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT 'b' || i FROM generate_series(1, 5000) AS i));
ANALYZE broker.broker_jobs;
ANALYZE broker.broker_job_dependency;
SELECT pg_temp.walk_buffers();
SELECT pg_temp.walk_buffers() AS more_crowded \gset
-- (an edge index eight times larger may be one level deeper: one buffer more per probe, of which the walk
-- makes one per job and one per group it reaches, 66 here; reading the other tenant's 35,000 new jobs or
-- edges would cost hundreds)
SELECT cmp_ok(:more_crowded, '<=', :crowded + 66,
              format('the walk touches no more buffers beside 40,000 jobs of another tenant than beside 5,000 but for deeper indexes (%s, %s; alone %s)',
                     :more_crowded, :crowded, :alone));

-- the walk is tenant-restricted and index-driven: no sequential scan of the jobs or edges
CREATE TEMP TABLE seq_before AS
SELECT relid, seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'broker';
SELECT pg_temp.walk_buffers();
SELECT is((SELECT count(*) FROM pg_stat_xact_user_tables AS s JOIN seq_before AS b USING (relid)
            WHERE s.relname IN ('broker_jobs', 'broker_job_dependency') AND s.seq_scan > b.seq_scan), 0::bigint,
          'the walk scans neither table sequentially');

-- a cycle is still found, through the chain
SELECT throws_ok($$SELECT broker.broker_add_job('l0 again', 'SELECT 1', p_job_group => 'L0', p_depends_on_groups => ARRAY['top'])$$,
                 '23514', NULL, 'a cycle through the 31-job chain is rejected');

-- bounded: a walk that would pass its limit stops with 54000 (the limit is an argument here,
-- 100,000 in the trigger; 33 jobs wait on l0, itself included)
SELECT throws_ok($$SELECT * FROM broker._dependency_cycle(
                      ARRAY[(SELECT job_id FROM broker.broker_jobs WHERE job_name = 'l0')], 20)$$,
                 '54000', NULL, 'a walk past its limit stops with 54000');
SELECT is((SELECT count(*) FROM broker._dependency_cycle(
              ARRAY[(SELECT job_id FROM broker.broker_jobs WHERE job_name = 'l0')], 100)), 0::bigint,
          'within its limit the same walk finds no cycle');

SELECT * FROM finish();
ROLLBACK;
