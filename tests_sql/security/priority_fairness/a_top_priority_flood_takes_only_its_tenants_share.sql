-- Priority orders a tenant's own jobs, never one tenant ahead of another's share (docs/flow-control.md):
-- in a queue that tenants share, a flood of one tenant's jobs at the top priority takes its share of each
-- claim and no more, and neither delays nor costs anything to the claims of another queue.
BEGIN;
SELECT plan(4);

CREATE FUNCTION pg_temp.claim_buffers(q integer) RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE v_plan json;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker.broker_get(%s)', q) INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::integer + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::integer;
END $f$;

-- tenant_b: one job in the shared queue 1, 20 in its own queue 2
SELECT broker.broker_set_tenant('tenant_b');
SELECT broker.broker_add_job('b shared', 'SELECT 1', 1);
SELECT count(*) FROM (SELECT broker.broker_add_job('b own ' || i, 'SELECT 1', 2) FROM generate_series(1, 20) AS i) AS x;
ANALYZE broker.broker_jobs;
SELECT pg_temp.claim_buffers(3), pg_temp.claim_buffers(3);   -- warm caches (plans made now)
SELECT pg_temp.claim_buffers(2) AS quiet \gset

-- tenant_a: 5,000 jobs at the top priority in the shared queue
SELECT broker.broker_set_tenant('tenant_a');
SELECT count(*) FROM broker.broker_add_jobs((
    SELECT jsonb_agg(jsonb_build_object('job_name', 'a ' || i, 'execute_str', 'SELECT 1', 'job_queue', 1,
                                        'job_priority', 2147483647))
      FROM generate_series(1, 5000) AS i));
SELECT broker.broker_set_tenant('tenant_b');
ANALYZE broker.broker_jobs;
SELECT pg_temp.claim_buffers(3), pg_temp.claim_buffers(3);   -- (planned again after ANALYZE)

SELECT results_eq($$SELECT tenant_id, count(*) FROM broker.broker_get(1, NULL, 60, 100) GROUP BY 1 ORDER BY 1$$,
                  $$VALUES ('tenant_a', 99::bigint), ('tenant_b', 1::bigint)$$,
                  'in the shared queue, tenant_b''s job at priority 0 is claimed beside tenant_a''s top-priority flood');
SELECT is((SELECT job_name FROM broker.broker_get(2)), 'b own 2',
          'tenant_b''s own queue is claimed as before (oldest first)');
SELECT pg_temp.claim_buffers(2) AS busy \gset
SELECT cmp_ok(:busy, '<=', :quiet + 2,
              format('and its claims cost what they did without the flood (%s, %s buffers)', :busy, :quiet));
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 2 AND complete_status = 1), 3::bigint,
          'every claim of queue 2 took a job of queue 2');

SELECT * FROM finish();
ROLLBACK;
