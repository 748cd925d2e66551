-- broker_queue_stats: queue depth across tenants, for monitoring.
BEGIN;
SELECT plan(4);

SELECT broker.broker_add_job('ready', 'SELECT 1');
SELECT broker.broker_add_job('later', 'SELECT 1', p_run_after => now() + interval '1 hour');
SELECT broker.broker_add_job_simple('blocked', 'SELECT 1', 0, ARRAY['ready']);
SELECT broker.broker_add_job('fails', 'SELECT 1/0', 2);
SELECT broker.broker_run(job_id) FROM broker.broker_get(2);
SELECT broker.broker_add_job('claimed', 'SELECT 1', 3);
SELECT broker.broker_get(3);
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('acme ready', 'SELECT 1');
SELECT broker.broker_set_tenant('default');

SELECT results_eq($$SELECT * FROM broker.broker_queue_stats()$$,
    $$VALUES (1, 'acme', 1::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint),
             (1, 'default', 1, 1, 1, 0, 0, 0, 0),
             (2, 'default', 0, 0, 0, 0, 0, 1, 0),
             (3, 'default', 0, 0, 0, 1, 0, 0, 0)$$,
    'per queue and tenant: ready, blocked, delayed, running, finished in the last hour');
UPDATE broker.broker_jobs SET finished_at = now() - interval '2 hours' WHERE job_name = 'fails';
SELECT is((SELECT count(*) FROM broker.broker_queue_stats() WHERE job_queue = 2), 0::bigint, 'older finished jobs drop out');

SET LOCAL ROLE broker_runtime;
SELECT is((SELECT count(DISTINCT tenant_id) FROM broker.broker_queue_stats()), 2::bigint,
          'broker_runtime sees the depth of every tenant');
RESET ROLE;
SELECT function_privs_are('broker', 'broker_queue_stats', '{}'::text[], 'broker_enqueue', '{}'::text[],
                          'enqueuers cannot read other tenants'' queue depth');

SELECT * FROM finish();
ROLLBACK;
