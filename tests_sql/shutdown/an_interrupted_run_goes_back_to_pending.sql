-- A run its runner ended at shutdown (broker_interrupt_jobs) is not a failure: the job is
-- pending again with the attempt not counted, the interruption counted apart, its dependents
-- untouched; a run that finished keeps its outcome; bad input is refused with a SQLSTATE.
BEGIN;
SELECT plan(12);
\ir ../lib/run_next.psql

SELECT broker.broker_add_job('long', 'SELECT 1', 1, p_job_group => 'long');  -- max_attempts 1
SELECT broker.broker_add_job('after long', 'SELECT 1', 2, p_depends_on_groups => ARRAY['long']);
SELECT broker.broker_add_job('quick', 'SELECT 1', 3);
CREATE TEMP TABLE got AS SELECT job_id, job_name, lease_token FROM broker.broker_get(1);

SELECT is((SELECT count(*) FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM got),
                                                             ARRAY[gen_random_uuid()])), 0::bigint,
          'another token interrupts nothing');
SELECT is((SELECT array_agg(i.job_id) FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM got),
                                                                        (SELECT array_agg(lease_token) FROM got)) AS i),
          (SELECT array_agg(job_id) FROM got), 'its claim''s token interrupts it');
SELECT results_eq($$SELECT complete_status, attempts, interruptions, lease_token IS NULL, last_error_sqlstate IS NULL
                      FROM broker.broker_jobs WHERE job_name = 'long'$$,
                  $$VALUES (0::smallint, 0, 1, true, true)$$,
                  'pending again, no attempt counted, one interruption, no error recorded');
SELECT results_eq($$SELECT complete_status, pending_deps FROM broker.broker_jobs WHERE job_name = 'after long'$$,
                  $$VALUES (0::smallint, 1)$$, 'its dependent still waits for it (not cancelled)');
SELECT is((SELECT count(*) FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM got),
                                                             (SELECT array_agg(lease_token) FROM got))), 0::bigint,
          'the same token again interrupts nothing: the claim is over');

-- with max_attempts 1 it still runs, and then its dependent
SELECT is(pg_temp.run_next(1), 'long', 'the interrupted job is claimed and runs again');
SELECT results_eq($$SELECT complete_status, attempts, interruptions FROM broker.broker_jobs WHERE job_name = 'long'$$,
                  $$VALUES (2::smallint, 1, 1)$$, 'completed on its one attempt');
SELECT is(pg_temp.run_next(2), 'after long', 'its dependent runs after it');

-- a run that finished keeps its outcome: a finished job has no lease to interrupt
CREATE TEMP TABLE quick AS SELECT job_id, lease_token FROM broker.broker_get(3);
SELECT broker.broker_run((SELECT job_id FROM quick), (SELECT lease_token FROM quick));
SELECT is((SELECT count(*) FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM quick),
                                                             (SELECT array_agg(lease_token) FROM quick))), 0::bigint,
          'a completed job is not interrupted');

SELECT throws_ok($$SELECT * FROM broker.broker_interrupt_jobs(NULL, '{}')$$, '22004', NULL, 'NULL ids: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_interrupt_jobs('{1,2}', ARRAY[gen_random_uuid()])$$, '22023', NULL,
                 'lengths differ: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_interrupt_jobs(
                      (SELECT array_agg(i::bigint) FROM generate_series(1, 1001) AS i),
                      (SELECT array_agg(gen_random_uuid()) FROM generate_series(1, 1001)))$$, '22023', NULL,
                 'more than 1000 jobs: 22023');

SELECT * FROM finish();
ROLLBACK;
