-- A task name is recorded as a tenant's (broker_task_name_tenant, which broker_task_queue's policy
-- reads) for the role whose rights enqueue it, the current role the policies of broker_jobs check,
-- not the session's role (its SET ROLE or its login). Under strict tenancy a job of tenant b (its
-- executor is SECURITY DEFINER, owned by its run_as, and runs on the runner's session, whose role is
-- mapped to no tenant) and an application's SECURITY DEFINER function called by an unmapped login
-- enqueue tasks of a new name: were nothing recorded, the name's queue would not be b's to see and
-- the insert policy would refuse the task (42501). And the other way round, code of tenant a run by
-- a login mapped to a and b (a SECURITY DEFINER function of a's role) records no name as b's.
BEGIN;
SELECT plan(10);

CREATE ROLE broker_test_rec_b NOLOGIN IN ROLE broker_enqueue;        -- tenant b's application role
CREATE ROLE broker_test_rec_login NOLOGIN IN ROLE broker_enqueue;    -- a login of no tenant
CREATE ROLE broker_test_rec_a NOLOGIN IN ROLE broker_enqueue;        -- tenant a's application role
CREATE ROLE broker_test_rec_pool NOLOGIN IN ROLE broker_enqueue;     -- a login mapped to a and b
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name)
VALUES ('b', 'broker_test_rec_b'), ('a', 'broker_test_rec_a'), ('a', 'broker_test_rec_pool'), ('b', 'broker_test_rec_pool');
CREATE SCHEMA broker_test_rec_api AUTHORIZATION broker_test_rec_b;
GRANT USAGE ON SCHEMA broker_test_rec_api TO broker_test_rec_login, broker_test_rec_pool;
CREATE SCHEMA broker_test_rec_a_api AUTHORIZATION broker_test_rec_a;
GRANT USAGE ON SCHEMA broker_test_rec_a_api TO broker_test_rec_pool;
SELECT broker.broker_create_executor('broker_test_rec_b');

-- a job of tenant b that enqueues a task of a name b never used
SET LOCAL SESSION AUTHORIZATION broker_test_rec_b;
SELECT broker.broker_add_job('enqueues a task', $$SELECT broker.broker_add_task('from_a_job', '{}')$$, 31,
                             p_tenant_id => 'b');
RESET SESSION AUTHORIZATION;
SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE ran AS SELECT r.* FROM broker.broker_get(31) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;
SELECT is((SELECT ROW(complete_status, error_sqlstate)::text FROM ran), ROW(2::smallint, NULL::text)::text,
          'under strict tenancy a job of tenant b enqueues a task of a new name');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'b' AND job_name = 'from_a_job'), 1::bigint,
          'and the task is b''s');

-- tenant b's SECURITY DEFINER function, called by a login mapped to no tenant
SET LOCAL SESSION AUTHORIZATION broker_test_rec_b;
CREATE FUNCTION broker_test_rec_api.enqueue(p_task text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT a.job_id FROM broker.broker_add_task(p_task, '{}', p_tenant_id => 'b') AS a $$;
GRANT EXECUTE ON FUNCTION broker_test_rec_api.enqueue(text) TO broker_test_rec_login;
RESET SESSION AUTHORIZATION;
SET LOCAL SESSION AUTHORIZATION broker_test_rec_login;
SELECT lives_ok($$SELECT broker_test_rec_api.enqueue('from_a_definer')$$,
                'b''s SECURITY DEFINER function enqueues a task of a new name for any caller');
RESET SESSION AUTHORIZATION;

SET LOCAL SESSION AUTHORIZATION broker_test_rec_b;
SELECT broker.broker_set_tenant('b');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue ORDER BY 1), ARRAY['from_a_definer', 'from_a_job'],
          'b sees both names, recorded as its own');
SELECT ok(broker.broker_pause_task('from_a_job') AND broker.broker_pause_task('from_a_job', false),
          'and pauses and resumes the name its job used');
SELECT broker.broker_set_tenant('a');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue), '{}'::text[], 'tenant a sees none of them');
RESET SESSION AUTHORIZATION;

-- tenant a's code, run by a login that may act for a and b, records nothing as b's
SET LOCAL SESSION AUTHORIZATION broker_test_rec_a;
CREATE FUNCTION broker_test_rec_a_api.plant(p_task text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM broker.broker_set_tenant('b');
    RETURN broker._task_queue('plant', p_task, true);
END;
$$;
GRANT EXECUTE ON FUNCTION broker_test_rec_a_api.plant(text) TO broker_test_rec_pool;
RESET SESSION AUTHORIZATION;
SET LOCAL SESSION AUTHORIZATION broker_test_rec_pool;
SELECT broker_test_rec_a_api.plant('planted_by_a');
RESET SESSION AUTHORIZATION;
-- nor does a's role writing the record itself (the insert policy: the current tenant, if it may act for it)
SET LOCAL SESSION AUTHORIZATION broker_test_rec_a;
SELECT broker.broker_set_tenant('b');
SELECT throws_ok($$INSERT INTO broker.broker_task_name_tenant (tenant_id, task_name) VALUES ('b', 'from_a_job')$$,
                 '42501', NULL, 'a''s role cannot record a name as b''s with tenant b set');
SELECT broker.broker_set_tenant('a');
SELECT throws_ok($$INSERT INTO broker.broker_task_name_tenant (tenant_id, task_name) VALUES ('b', 'from_a_job')$$,
                 '42501', NULL, 'nor with its own tenant set');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant WHERE task_name = 'planted_by_a'), 0::bigint,
          'a''s function run by a login mapped to b records no name as b''s');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_name_tenant WHERE tenant_id = 'b' ORDER BY 1),
          ARRAY['from_a_definer', 'from_a_job'], 'b''s names are the two it used');

SELECT * FROM finish();
ROLLBACK;
