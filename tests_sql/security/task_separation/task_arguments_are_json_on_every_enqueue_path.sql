-- A task's arguments (broker_jobs.execute_str of a 'task' row) are JSON, whichever way the row
-- is written: broker_add_task takes jsonb, but broker_add_job, broker_add_jobs and a raw INSERT
-- by an enqueuer could put any text in the name's queue. A claim returns the arguments as jsonb,
-- so one such row failed every claim of the name in its tenant that reached it (the claim's
-- whole transaction rolled back, the row claimable again): a worker stuck for good, and its
-- healthy tasks with it.
BEGIN;
SELECT plan(6);

CREATE ROLE broker_test_enq NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_worker NOLOGIN IN ROLE broker_worker;
SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_add_task('render', '{"page": 1}');
SELECT job_queue AS q FROM broker.broker_task_queue WHERE task_name = 'render' \gset

SELECT throws_ok(format($$SELECT * FROM broker.broker_add_job('render', 'not json', %s, 9, p_job_language => 'task')$$, :q),
                 '22P02', NULL, 'broker_add_job: a task whose arguments are not JSON is refused');
SELECT throws_ok(format($$SELECT * FROM broker.broker_add_jobs(jsonb_build_array(jsonb_build_object(
                              'job_name', 'render', 'execute_str', '{"page": ', 'job_queue', %s, 'job_language', 'task')))$$, :q),
                 '22P02', NULL, 'broker_add_jobs: likewise');
SELECT throws_ok(format($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_language, job_queue, job_priority)
                          VALUES ('render', 'render', 'SELECT 1', 'task', %s, 9)$$, :q),
                 '22P02', NULL, 'a raw INSERT: likewise');
SELECT lives_ok(format($$SELECT * FROM broker.broker_add_job('render', '[1, "two"]', %s, p_job_language => 'task')$$, :q),
                'JSON arguments through broker_add_job are taken');
RESET SESSION AUTHORIZATION;

SET LOCAL SESSION AUTHORIZATION broker_test_worker;
SELECT set_config('broker.tenant_id', 'a', true);
SELECT is(ARRAY(SELECT args FROM broker.broker_claim_tasks(ARRAY['render'], 10) ORDER BY job_id),
          ARRAY['{"page": 1}', '[1, "two"]']::jsonb[], 'the worker claims the name''s tasks, each with its arguments');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_language = 'task' AND execute_str !~ '^[\[{]'), 0::bigint,
          'no task row holds other text');

SELECT * FROM finish();
ROLLBACK;
