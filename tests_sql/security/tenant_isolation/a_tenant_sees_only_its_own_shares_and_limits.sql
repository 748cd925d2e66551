-- Flow control seen by a tenant (broker_enqueue, no BYPASSRLS): broker_tenant_stats and broker_key_stats
-- show it its own rows and the limits across tenants, its share measured against the whole queue;
-- broker_job_waiting says nothing of another tenant's job. The runtime role reads every tenant.
BEGIN;
SELECT plan(7);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
SELECT broker.broker_set_limit('api', 1, NULL);   -- the default tenant's own limit
SELECT broker.broker_set_limit('mail', 1, NULL, p_all_tenants => true);
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue, concurrency_key)
VALUES ('tenant_a', 'a api', 'g', 'SELECT 1', 4, 'api'),
       ('tenant_b', 'b api', 'g', 'SELECT 1', 4, 'api'), ('tenant_b', 'b api', 'g', 'SELECT 1', 4, 'api'),
       ('tenant_b', 'b mail', 'g', 'SELECT 1', 4, 'mail'), ('tenant_b', 'b mail', 'g', 'SELECT 1', 4, 'mail');
SELECT count(*) FROM broker.broker_get(4, NULL, 60, 100);
SELECT max(job_id) AS b_waiting FROM broker.broker_jobs WHERE tenant_id = 'tenant_b' AND complete_status = 0 \gset
SELECT is(broker.broker_job_waiting(:b_waiting), 'waiting: limit mail (1 of 1 running)',
          'B''s second mail job waits for the limit across tenants');

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_a');
SELECT results_eq($$SELECT tenant_id, running, served FROM broker.broker_tenant_stats('1 day')$$,
                  $$VALUES ('tenant_a', 1::bigint, 1::bigint)$$, 'A sees its own row only');
SELECT is((SELECT share_served FROM broker.broker_tenant_stats('1 day')), 0.25::double precision,
          'its share is of the whole queue: 1 of the 4 jobs served');
SELECT results_eq($$SELECT concurrency_key, tenant_id, running, max_running, waiting FROM broker.broker_key_stats()$$,
                  $$VALUES ('api', 'tenant_a', 1::bigint, NULL::integer, 0::bigint), ('mail', NULL, 1::bigint, 1, 1::bigint)$$,
                  'A sees its own key and the limit across tenants (with every tenant''s count), not the default tenant''s limit');
SELECT is(broker.broker_job_waiting(:b_waiting), NULL, 'A learns nothing of why B''s job waits');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id <> 'tenant_a'), 0::bigint, 'A reads none of B''s jobs');
RESET ROLE;

SET LOCAL ROLE broker_test_runner;
SELECT is((SELECT count(DISTINCT tenant_id) FROM broker.broker_tenant_stats('1 day')), 2::bigint,
          'the runtime role reads every tenant''s shares');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
