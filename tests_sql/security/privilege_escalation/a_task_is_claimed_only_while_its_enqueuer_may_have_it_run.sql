-- A task is handed to a worker only while its enqueuer may still have it run, as a SQL job is run only then
-- (enqueuer_rights_are_checked_again_at_run_time.sql): an enqueuer unmapped from the tenant under strict
-- tenancy, or dropped, leaves tasks that a claim fails for good (42501, the reason, dependents cancelled)
-- instead of returning them to the worker; the other tasks of the claim are returned.
BEGIN;
SELECT plan(9);

CREATE ROLE broker_test_tc_erin NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_tc_kept NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_tc_dave NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_tc_worker NOLOGIN IN ROLE broker_worker;
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name)
VALUES ('tc', 'broker_test_tc_erin'), ('tc', 'broker_test_tc_kept'), ('tc', 'broker_test_tc_dave'),
       ('tc', 'broker_test_tc_worker');

SET LOCAL ROLE broker_test_tc_erin;
SELECT broker.broker_set_tenant('tc');
CREATE TEMP TABLE erins AS SELECT job_id FROM broker.broker_add_task('transfer', '{"to": "erin"}', p_max_attempts => 3);
GRANT SELECT ON erins TO PUBLIC;
SELECT broker.broker_add_job('after', 'SELECT 1', p_depends_on_job_ids => ARRAY(SELECT job_id FROM erins));
RESET ROLE;
SET LOCAL ROLE broker_test_tc_kept;
SELECT broker.broker_set_tenant('tc');
SELECT broker.broker_add_task('transfer', '{"to": "kept"}');
RESET ROLE;
SET LOCAL ROLE broker_test_tc_dave;
SELECT broker.broker_set_tenant('tc');
SELECT broker.broker_add_task('transfer', '{"to": "dave"}');
RESET ROLE;

-- erin is unmapped from the tenant, dave is dropped
DELETE FROM broker.broker_tenant_roles WHERE role_name = 'broker_test_tc_erin';
DROP OWNED BY broker_test_tc_dave;
DROP ROLE broker_test_tc_dave;

SET LOCAL ROLE broker_test_tc_worker;
SELECT broker.broker_set_tenant('tc');
CREATE TEMP TABLE got AS SELECT * FROM broker.broker_claim_tasks(ARRAY['transfer'], 10);
RESET ROLE;
SELECT broker.broker_set_tenant('tc');
SELECT is(ARRAY(SELECT args::text FROM got), ARRAY['{"to": "kept"}'],
          'the worker gets the task of the enqueuer that is still mapped, and none of the others');
SELECT is((SELECT ROW(complete_status, last_error_sqlstate, last_error_message)::text FROM broker.broker_jobs
            WHERE execute_str = '{"to": "erin"}'),
          ROW(3::smallint, '42501', 'enqueuer broker_test_tc_erin may no longer act for tenant ''tc''')::text,
          'the unmapped enqueuer''s task fails for good with 42501 and the reason, attempts left or not');
SELECT is((SELECT ROW(complete_status, last_error_sqlstate, last_error_message)::text FROM broker.broker_jobs
            WHERE execute_str = '{"to": "dave"}'),
          ROW(3::smallint, '42501', 'enqueuer role broker_test_tc_dave no longer exists')::text,
          'the dropped enqueuer''s task too');
SELECT is((SELECT ROW(outcome, error_sqlstate)::text FROM broker.broker_job_attempts WHERE job_id = (SELECT job_id FROM erins)),
          ROW('failed', '42501')::text, 'its attempt is recorded as failed');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'after'), 4::smallint,
          'its dependents are cancelled');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE execute_str = '{"to": "kept"}'), 1::smallint,
          'the kept task is running');

-- not retried once the right is back: losing a right is no passing fault
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('tc', 'broker_test_tc_erin');
SET LOCAL ROLE broker_test_tc_worker;
SELECT broker.broker_set_tenant('tc');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['transfer'], 10)$$,
                'a refused task is not claimed again, even once the right is back');

-- while the enqueuer keeps its rights, its task is claimed as before
RESET ROLE;
SET LOCAL ROLE broker_test_tc_erin;
SELECT broker.broker_set_tenant('tc');
SELECT broker.broker_add_task('transfer', '{"to": "erin again"}');
RESET ROLE;
SET LOCAL ROLE broker_test_tc_worker;
SELECT broker.broker_set_tenant('tc');
SELECT is(ARRAY(SELECT args::text FROM broker.broker_claim_tasks(ARRAY['transfer'], 10)), ARRAY['{"to": "erin again"}'],
          'a mapped enqueuer''s task is claimed');
RESET ROLE;

-- without strict tenancy the tenant is no right to lose; a dropped enqueuer still is
SELECT broker.broker_set_strict_tenancy(false);
CREATE ROLE broker_test_tc_gone NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_tc_gone;
SELECT broker.broker_set_tenant('tc');
SELECT broker.broker_add_task('transfer', '{"to": "gone"}');
RESET ROLE;
DROP OWNED BY broker_test_tc_gone;
DROP ROLE broker_test_tc_gone;
SET LOCAL ROLE broker_test_tc_worker;
SELECT broker.broker_set_tenant('tc');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['transfer'], 10)$$,
                'without strict tenancy, a dropped enqueuer''s task is not handed out either');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
