-- broker_complete_tasks with a task named more than once (its id and token repeated) used to complete it once
-- per repetition in one call: as many attempt rows as the array held (up to 1,000 for one attempt) and each
-- repetition answered 'completed'. A batch that names a task twice is refused (22023, naming it) and records
-- nothing; the task is then completed once.
BEGIN;
SELECT plan(5);

CREATE ROLE broker_test_dup_enq NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_dup_worker NOLOGIN IN ROLE broker_worker;
SET LOCAL ROLE broker_test_dup_enq;
SELECT broker.broker_set_tenant('dup');
SELECT broker.broker_add_task('render', '{"n": 1}');
SELECT broker.broker_add_task('render', '{"n": 2}');
RESET ROLE;
SET LOCAL ROLE broker_test_dup_worker;
SELECT broker.broker_set_tenant('dup');
CREATE TEMP TABLE got AS SELECT job_id, lease_token FROM broker.broker_claim_tasks(ARRAY['render'], 10) ORDER BY job_id;
SELECT is((SELECT count(*) FROM got), 2::bigint, 'two tasks claimed');
SELECT throws_ok(
    format('SELECT * FROM broker.broker_complete_tasks(ARRAY[%1$s, %2$s, %1$s], ARRAY[%3$L, %4$L, %3$L]::uuid[])',
           (SELECT min(job_id) FROM got), (SELECT max(job_id) FROM got),
           (SELECT lease_token FROM got ORDER BY job_id LIMIT 1), (SELECT lease_token FROM got ORDER BY job_id DESC LIMIT 1)),
    '22023', format('broker_complete_tasks: task %s is named more than once', (SELECT min(job_id) FROM got)),
    'a batch that names a task twice is refused');
SELECT is(ARRAY(SELECT outcome FROM broker.broker_complete_tasks(ARRAY(SELECT job_id FROM got ORDER BY job_id),
                                                                 ARRAY(SELECT lease_token FROM got ORDER BY job_id))),
          ARRAY['completed', 'completed'], 'each task once: both completed');
RESET ROLE;
SELECT broker.broker_set_tenant('dup');
SELECT is((SELECT count(*) FROM broker.broker_job_attempts WHERE job_id IN (SELECT job_id FROM got)), 2::bigint,
          'one attempt row per task');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2), 2::bigint, 'both completed');

SELECT * FROM finish();
ROLLBACK;
