-- broker_interrupt_jobs hands a job back without counting its attempt, so it must be the
-- claimer's alone: a runtime session interrupts only the jobs whose lease token it holds (an
-- id without its token, another claim's token, a guessed token: nothing), and an enqueuer
-- cannot call it at all.
BEGIN;
SELECT plan(7);

CREATE ROLE broker_test_victim NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_intruder NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_victim;
SELECT broker.broker_add_job('victim ' || i, 'SELECT 1', 1, 0) FROM generate_series(1, 2) AS i;
RESET ROLE;

-- the victim's jobs, claimed by the runner (this session as broker_runtime)
SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE got AS SELECT job_id, job_name, lease_token FROM broker.broker_get(1, NULL, 60, 2);
RESET ROLE;
SELECT is((SELECT count(*) FROM got), 2::bigint, 'the runner holds two claims');

SET LOCAL ROLE broker_test_intruder;
SELECT throws_ok($$SELECT * FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM got),
                                                              (SELECT array_agg(lease_token) FROM got))$$,
                 '42501', NULL, 'an enqueuer cannot interrupt jobs, even with their tokens');
RESET ROLE;

SET LOCAL ROLE broker_runtime;
SELECT is((SELECT count(*) FROM broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM got),
                                                             (SELECT array_agg(gen_random_uuid()) FROM got))), 0::bigint,
          'guessed tokens interrupt nothing');
SELECT is((SELECT count(*) FROM broker.broker_interrupt_jobs(
              ARRAY[(SELECT job_id FROM got WHERE job_name = 'victim 1')],
              ARRAY[(SELECT lease_token FROM got WHERE job_name = 'victim 2')])), 0::bigint,
          'another claim''s token interrupts nothing');
SELECT is((SELECT array_agg(i.job_id) FROM broker.broker_interrupt_jobs(
              ARRAY[(SELECT job_id FROM got WHERE job_name = 'victim 1')],
              ARRAY[(SELECT lease_token FROM got WHERE job_name = 'victim 1')]) AS i),
          ARRAY[(SELECT job_id FROM got WHERE job_name = 'victim 1')], 'its own token interrupts the one job');
RESET ROLE;
SELECT results_eq($$SELECT job_name, complete_status, attempts, interruptions FROM broker.broker_jobs
                     WHERE job_name LIKE 'victim %' ORDER BY job_name$$,
                  $$VALUES ('victim 1', 0::smallint, 0, 1), ('victim 2', 1::smallint, 1, 0)$$,
                  'only the job whose token was given went back, its attempt not counted');
SELECT ok(NOT has_column_privilege('broker_enqueue', 'broker.broker_jobs', 'interruptions', 'INSERT'),
          'an enqueuer cannot insert a job with interruptions of its choosing');

SELECT * FROM finish();
ROLLBACK;
