-- broker_get: priority, FIFO, queues, delays, batches, leases, argument checks.
BEGIN;
SELECT plan(19);

SELECT is((SELECT count(*) FROM broker.broker_get(1)), 0::bigint, 'empty queue: no row');

SELECT broker.broker_add_job('low', 'SELECT 1', 1, 0);
SELECT broker.broker_add_job('high', 'SELECT 1', 1, 10);
SELECT broker.broker_add_job('low2', 'SELECT 1', 1, 0);
SELECT broker.broker_add_job('other queue', 'SELECT 1', 2, 100);
SELECT broker.broker_add_job('future', 'SELECT 1', 1, 50, p_run_after => now() + interval '1 minute');
SELECT broker.broker_add_job('past', 'SELECT 1', 1, 0, p_run_after => now() - interval '1 minute');

SELECT is((SELECT job_name FROM broker.broker_get(1)), 'high', 'highest priority first; future job skipped');
SELECT is((SELECT job_name FROM broker.broker_get(1)), 'past', 'same priority: earliest run_after first');
SELECT is((SELECT job_name FROM broker.broker_get(1)), 'low', 'then FIFO');
SELECT is((SELECT job_name FROM broker.broker_get()), 'low2', 'broker_get() defaults to queue 1');
SELECT is((SELECT count(*) FROM broker.broker_get(1)), 0::bigint, 'only the future job is left in queue 1');
SELECT is((SELECT job_name FROM broker.broker_get(2)), 'other queue', 'queues are separate');

SELECT results_eq(
    $$SELECT complete_status, attempts, lease_token IS NOT NULL, started_at >= now()
        FROM broker.broker_jobs WHERE job_name = 'high'$$,
    $$VALUES (1::smallint, 1, true, true)$$, 'a claimed job is running with a lease and one attempt');
SELECT ok((SELECT lease_expires_at - started_at = interval '60 seconds' FROM broker.broker_jobs WHERE job_name = 'high'),
          'default lease is 60 seconds');

-- lease length and instance, batch size
SELECT broker.broker_add_job('b' || i, 'SELECT 1', 3, 0) FROM generate_series(1, 5) AS i;
CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('claimer') AS id;
CREATE TEMP TABLE got AS SELECT * FROM broker.broker_get(3, (SELECT id FROM inst), 5, 3);
SELECT is((SELECT count(*) FROM got), 3::bigint, 'batch size 3 claims three jobs');
SELECT ok((SELECT every(j.lease_expires_at - j.started_at = interval '5 seconds') FROM got JOIN broker.broker_jobs j USING (job_id)),
          'p_lease_seconds sets the lease');
SELECT is((SELECT array_agg(DISTINCT lease_instance_id) FROM broker.broker_jobs WHERE job_id IN (SELECT job_id FROM got)),
          ARRAY[(SELECT id FROM inst)], 'the claiming instance is recorded');
SELECT broker.broker_shutdown_instance((SELECT id FROM inst));
SELECT is((SELECT array_agg(job_name ORDER BY job_name) FROM got), ARRAY['b1', 'b2', 'b3'], 'oldest first in a batch');
SELECT is((SELECT count(*) FROM broker.broker_get(3, NULL, NULL, 10)), 2::bigint, 'a larger batch takes what is left');

-- batches cross priority levels in order
SELECT broker.broker_add_job('p' || i, 'SELECT 1', 4, i) FROM generate_series(1, 4) AS i;
SELECT is((SELECT array_agg(job_priority ORDER BY job_priority DESC) FROM broker.broker_get(4, NULL, NULL, 3)),
          ARRAY[4, 3, 2], 'a batch spans priority levels, highest first');

-- lease_seconds setting
SELECT broker.broker_set('lease_seconds', '7', true);
SELECT broker.broker_add_job('leased', 'SELECT 1', 5, 0);
CREATE TEMP TABLE got5 AS SELECT * FROM broker.broker_get(5);
SELECT ok((SELECT j.lease_expires_at - j.started_at = interval '7 seconds'
             FROM got5 JOIN broker.broker_jobs j USING (job_id)),
          'the lease_seconds setting is the default lease');

SELECT throws_ok($$SELECT * FROM broker.broker_get(0)$$, '22023', NULL, 'queue 0: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, NULL, 0)$$, '22023', NULL, 'lease 0: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, NULL, 10, 0)$$, '22023', NULL, 'batch 0: 22023');

SELECT * FROM finish();
ROLLBACK;
