-- A job may not run as a role that can become broker_admin (or a superuser or BYPASSRLS role) by
-- membership of any kind, inheriting or not. A job's SQL cannot SET ROLE (its executor is SECURITY
-- DEFINER), but ALTER ... OWNER TO needs membership only: a job running as a NOINHERIT member of
-- broker_admin creates a SECURITY DEFINER function in its own executor schema (broker_admin owns that
-- schema, so it may own what is in it), hands it to broker_admin and calls it, and then reads and
-- writes every tenant's rows through the policies broker_admin_all. Refused at enqueue, and at run
-- time for a job enqueued before its role got such a membership.
BEGIN;
SELECT plan(10);

CREATE TABLE public.run_as_loot (v text);
GRANT INSERT, SELECT ON public.run_as_loot TO PUBLIC;
GRANT USAGE ON SCHEMA public TO PUBLIC;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
-- gate: a NOINHERIT member of broker_admin (no privileges of broker_admin, but it may give it objects)
CREATE ROLE broker_test_gate NOLOGIN NOINHERIT IN ROLE broker_admin;
CREATE ROLE broker_test_super NOLOGIN SUPERUSER;
CREATE ROLE broker_test_bypass NOLOGIN BYPASSRLS;
CREATE ROLE broker_test_gate_su NOLOGIN NOINHERIT IN ROLE broker_test_super;
CREATE ROLE broker_test_gate_rls NOLOGIN NOINHERIT IN ROLE broker_test_bypass;
-- a role with nothing yet, that gets a membership in broker_admin after the job was enqueued
CREATE ROLE broker_test_later NOLOGIN NOINHERIT;
CREATE ROLE broker_test_eve NOLOGIN IN ROLE broker_enqueue, broker_test_gate, broker_test_gate_su, broker_test_gate_rls,
                                             broker_test_later;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_job('secret', $$SELECT 'alice''s secret'$$, 5, p_tenant_id => 'tenant_a');
RESET ROLE;

SELECT ok(NOT pg_has_role('broker_test_gate', 'broker_admin', 'USAGE') AND pg_has_role('broker_test_gate', 'broker_admin', 'MEMBER'),
          'gate is a member of broker_admin without its privileges');

SET LOCAL ROLE broker_test_eve;
SELECT broker.broker_set_tenant('tenant_e');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_run_as => 'broker_test_gate', p_tenant_id => 'tenant_e')$$,
    '42501', NULL, 'a job may not run as a NOINHERIT member of broker_admin');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as)
                   VALUES ('x', 'x', 'SELECT 1', 'broker_test_gate')$$,
    '42501', NULL, 'nor be inserted so (the insert policy)');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_run_as => 'broker_test_gate_su', p_tenant_id => 'tenant_e')$$,
    '42501', NULL, 'nor as a NOINHERIT member of a superuser');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_run_as => 'broker_test_gate_rls', p_tenant_id => 'tenant_e')$$,
    '42501', NULL, 'nor as a NOINHERIT member of a BYPASSRLS role');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, run_as)
                   VALUES ('x', '* * * * *', 'SELECT 1', 'broker_test_gate')$$,
    '42501', NULL, 'nor may a schedule run as one');

-- enqueued while later was an ordinary role; the job takes broker_admin's rights if it runs
SELECT lives_ok($j$SELECT broker.broker_add_job('escalate', $$
DECLARE
    v_off text := pg_catalog.set_config('check_function_bodies', 'off', true);
    v_schema text := 'broker_exec_' || (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user);
BEGIN
    EXECUTE format('CREATE FUNCTION %I.steal() RETURNS text LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS %L',
                   v_schema, 'SELECT string_agg(execute_str, '','') FROM broker.broker_jobs');
    EXECUTE format('ALTER FUNCTION %I.steal() OWNER TO broker_admin', v_schema);
    EXECUTE format('INSERT INTO public.run_as_loot SELECT %I.steal()', v_schema);
END $$, 1, 0, 'plpgsql', p_run_as => 'broker_test_later', p_tenant_id => 'tenant_e')$j$,
    'a job that runs as an ordinary role is enqueued');
RESET ROLE;
GRANT broker_admin TO broker_test_later;

SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE outcome AS
SELECT g.job_name, r.complete_status, r.error_sqlstate, r.error_message
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;
SELECT is((SELECT error_sqlstate || ' ' || error_message FROM outcome WHERE job_name = 'escalate'),
          '42501 enqueuer broker_test_eve may no longer run jobs as broker_test_later',
          'once its role is a member of broker_admin, it fails at run time');
SELECT is((SELECT count(*) FROM public.run_as_loot), 0::bigint, 'and read nobody''s jobs');
SELECT is((SELECT count(*) FROM pg_proc WHERE proname = 'steal'), 0::bigint, 'nor handed anything to broker_admin');

SELECT * FROM finish();
ROLLBACK;
