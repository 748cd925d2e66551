-- What a runner reads on its session connection: the queue numbers with a job claimable now (every tenant),
-- and which claimed jobs a runner session executes now and which wait (to start, or for their commit).
BEGIN;
SELECT plan(6);

SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'no jobs: no ready queue');
SELECT broker.broker_add_job('q2', 'SELECT 1', 2);
SELECT broker.broker_add_job('q7 later', 'SELECT 1', 7, p_run_after => now() + interval '1 hour');
SELECT broker.broker_set_tenant('other');
SELECT broker.broker_add_job('q5 other tenant', 'SELECT 1', 5);
SELECT broker.broker_set_tenant('default');
SELECT broker.broker_add_job('q9 blocked', 'SELECT 1', 9, p_depends_on_job_ids => ARRAY[(SELECT job_id FROM broker.broker_jobs WHERE job_name = 'q2')]);
SELECT is(broker.broker_ready_queues(), '{2,5}'::integer[],
          'ready queues of every tenant; a delayed job and a blocked one make none ready');
SELECT broker.broker_get(2);
SELECT is(broker.broker_ready_queues(), '{5}'::integer[], 'a claimed job is not ready');

SELECT is((SELECT ROW(job_name, activity)::text FROM broker.broker_job_activity()), ROW('q2', 'waiting')::text,
          'claimed, no session executes it: waiting');
-- a runner session names the job it executes in application_name (run_jobs does it)
SELECT set_config('application_name', 'pgsql_broker job ' || (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'q2'), true);
SELECT pg_stat_clear_snapshot();  -- (pg_stat_activity is read once per transaction)
SELECT is((SELECT activity FROM broker.broker_job_activity()), 'executing', 'named by a runner session: executing');
SELECT function_privs_are('broker', 'broker_ready_queues', '{}'::text[], 'broker_enqueue', '{}'::text[],
                          'an enqueuer cannot read the ready queues of other tenants');

SELECT * FROM finish();
ROLLBACK;
