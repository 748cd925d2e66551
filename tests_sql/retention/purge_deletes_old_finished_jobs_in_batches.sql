-- broker_purge_jobs: retention of finished jobs in bounded batches, per final state or all.
BEGIN;
SELECT plan(12);

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'old', 'old', 'SELECT 1', 2 + (i % 3), now() - interval '10 days' FROM generate_series(1, 25) AS i;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'recent', 'recent', 'SELECT 1', 2, now() FROM generate_series(1, 5);
SELECT broker.broker_add_job('pending', 'SELECT 1');
-- an edge from a pending job to an old completed job goes with it
SELECT broker.broker_add_job('waits on old', 'SELECT 1',
    p_depends_on_job_ids => ARRAY[(SELECT min(job_id) FROM broker.broker_jobs WHERE job_name = 'old' AND complete_status = 2)]);

SELECT is(broker.broker_purge_jobs(interval '7 days', 10), 10, 'one batch deletes at most the batch size');
SELECT is(broker.broker_purge_jobs(interval '7 days', 10), 10, 'the next batch');
SELECT is(broker.broker_purge_jobs(interval '7 days', 10), 5, 'the rest');
SELECT is(broker.broker_purge_jobs(interval '7 days', 10), 0, 'then nothing');
SELECT is((SELECT array_agg(DISTINCT job_name ORDER BY job_name) FROM broker.broker_jobs),
          ARRAY['pending', 'recent', 'waits on old'], 'recent and unfinished jobs are kept');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'waits on old'), 0, 'the waiting job is still ready');
SELECT throws_ok($$SELECT broker.broker_purge_jobs(interval '-1 day')$$, '22023', NULL, 'negative age: 22023');

-- one final state at a time
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'by state', 'by state', 'SELECT 1', 2 + (i % 3), now() - interval '10 days' FROM generate_series(1, 30) AS i;
SELECT is(broker.broker_purge_jobs(interval '7 days', 100, 3::smallint), 10, 'only failed jobs, when asked for state 3');
SELECT is((SELECT array_agg(DISTINCT complete_status ORDER BY complete_status) FROM broker.broker_jobs
            WHERE job_name = 'by state'), ARRAY[2, 4]::smallint[], '... the others stay');
SELECT is(broker.broker_purge_jobs(interval '7 days', 15), 15, 'any state: the batch size holds across states');
SELECT is(broker.broker_purge_jobs(interval '7 days', 15), 5, '... and the rest');
SELECT throws_ok($$SELECT broker.broker_purge_jobs(interval '1 day', 10, 1::smallint)$$, '22023', NULL,
                 'a state that is not final: 22023');

SELECT * FROM finish();
ROLLBACK;
