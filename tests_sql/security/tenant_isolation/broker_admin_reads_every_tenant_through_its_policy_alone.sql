-- No broker role has BYPASSRLS (issue 34): broker_admin, the owner as which the runtime functions run,
-- reads and writes every tenant through one policy per table, broker_admin_all (TO broker_admin), made by
-- roles.sql. That policy must reach broker_admin and the roles with its privileges, and nobody else: an
-- enqueuer of another tenant, a runtime login and a worker login stay exactly as confined as before, also
-- by way of run_as; the tables keep FORCE ROW LEVEL SECURITY; the tick, as the owner, still plans fires in
-- the past (the clamp on next_fire_at exempted BYPASSRLS writers, which broker_admin no longer is).
BEGIN;
SELECT plan(22);

SELECT is((SELECT array_agg(rolname ORDER BY rolname) FROM pg_roles
            WHERE rolname LIKE 'broker\_%' AND (rolsuper OR rolbypassrls OR rolreplication)),
          NULL, 'no broker role is a superuser, BYPASSRLS or REPLICATION');
SELECT is((SELECT array_agg(c.relname ORDER BY c.relname) FROM pg_class c
            WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT (c.relrowsecurity AND c.relforcerowsecurity)),
          NULL, 'every broker table forces row-level security');
SELECT is((SELECT array_agg(c.relname ORDER BY c.relname) FROM pg_class c
            WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT EXISTS (SELECT 1 FROM pg_policy p
                               WHERE p.polrelid = c.oid AND p.polname = 'broker_admin_all' AND p.polcmd = '*'
                                 AND p.polpermissive AND p.polroles = ARRAY['broker_admin'::regrole::oid]
                                 AND pg_get_expr(p.polqual, p.polrelid) = 'true'
                                 AND pg_get_expr(p.polwithcheck, p.polrelid) = 'true')),
          NULL, 'every broker table has broker_admin_all: FOR ALL TO broker_admin USING (true) WITH CHECK (true)');
SELECT is((SELECT array_agg(c.relname || '.' || p.polname ORDER BY 1) FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
            WHERE c.relnamespace = 'broker'::regnamespace AND p.polroles <> '{0}' AND p.polname <> 'broker_admin_all'),
          NULL, 'no other policy names a role');
SELECT is((SELECT array_agg(m.roleid::regrole::text ORDER BY 1) FROM pg_auth_members m
            WHERE m.member IN (SELECT oid FROM pg_roles WHERE rolname IN ('broker_runtime', 'broker_enqueue', 'broker_worker',
                                                                         'broker_retention'))
              AND pg_has_role(m.roleid, 'broker_admin', 'MEMBER')),
          NULL, 'no other broker role is a member of broker_admin');

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
CREATE ROLE broker_test_worker NOLOGIN IN ROLE broker_worker;
-- a member of broker_admin, and an enqueuer that may SET ROLE to it (through a NOINHERIT role) without
-- having its privileges
CREATE ROLE broker_test_admin_member NOLOGIN IN ROLE broker_admin, broker_enqueue;
CREATE ROLE broker_test_gate NOLOGIN NOINHERIT IN ROLE broker_test_admin_member;
CREATE ROLE broker_test_carol NOLOGIN IN ROLE broker_enqueue, broker_test_gate;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_a');
CREATE TEMP TABLE a_job AS SELECT job_id FROM broker.broker_add_job('a1', 'SELECT 1');
RESET ROLE;
GRANT SELECT ON a_job TO PUBLIC;
SET LOCAL ROLE broker_test_bob;
SELECT broker.broker_set_tenant('tenant_b');
SELECT broker.broker_add_job('b1', 'SELECT 1');

-- an enqueuer of another tenant
SELECT is((SELECT count(*) FROM broker.broker_jobs), 1::bigint, 'B reads its own job only');
SELECT is_empty(format('UPDATE broker.broker_jobs SET cancel_reason = ''x'' WHERE job_id = %s RETURNING job_id',
                       (SELECT job_id FROM a_job)), 'B updates none of A''s jobs');
SELECT ok(NOT pg_has_role(CURRENT_USER, 'broker_admin', 'MEMBER'), 'B cannot become broker_admin (no membership)');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_run_as => 'broker_admin')$$, '42501', NULL,
    'B cannot enqueue as broker_admin');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as) VALUES ('x', 'x', 'SELECT 1', 'broker_admin')$$,
    '42501', NULL, 'nor insert a job that runs as broker_admin');
RESET ROLE;

-- a runtime login and a worker login
SET LOCAL ROLE broker_test_runner;
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 1::bigint, 'a runtime login reads only its tenant directly');
SELECT ok(NOT pg_has_role(CURRENT_USER, 'broker_admin', 'MEMBER'), 'a runtime login cannot become broker_admin');
SELECT throws_ok(format('UPDATE broker.broker_jobs SET complete_status = 2 WHERE job_id = %s', (SELECT job_id FROM a_job)),
    '42501', NULL, 'nor write a job');
RESET ROLE;
SET LOCAL ROLE broker_test_worker;
SELECT throws_ok('SELECT count(*) FROM broker.broker_jobs', '42501', NULL, 'a worker login reads no table');
SELECT ok(NOT pg_has_role(CURRENT_USER, 'broker_admin', 'MEMBER'), 'nor becomes broker_admin');
RESET ROLE;

-- run_as a role with broker_admin's privileges is a superuser's to give (as run_as a BYPASSRLS role is)
SET LOCAL ROLE broker_test_carol;
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 1::bigint, 'an enqueuer that may only SET ROLE to an admin member reads its tenant only');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_run_as => 'broker_test_admin_member')$$, '42501', NULL,
    'and may not enqueue a job that would run with broker_admin''s privileges');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as)
                   VALUES ('x', 'x', 'SELECT 1', 'broker_test_admin_member')$$,
    '42501', NULL, 'nor insert one');
RESET ROLE;

-- broker_admin and the roles with its privileges read every tenant, whatever tenant is set
SET LOCAL ROLE broker_admin;
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 2::bigint, 'broker_admin reads every tenant''s jobs');
RESET ROLE;
SET LOCAL ROLE broker_test_admin_member;
SELECT is((SELECT count(*) FROM broker.broker_jobs), 2::bigint, 'so does a role with its privileges');
RESET ROLE;

-- the tick (as the owner) plans a fire in the past as it is: 2000-01-01 is before any clock this runs on
INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, run_as, created_by, next_fire_at, tenant_id)
VALUES ('past', '*/5 * * * *', 'SELECT 1', 'broker_test_alice', 'broker_test_alice', '2000-01-01 00:00:00+00', 'tenant_a');
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at('2000-01-01 00:00:30+00')), 1, 'the tick fires the due schedule');
SELECT is((SELECT next_fire_at FROM broker.broker_schedule WHERE schedule_name = 'past'), '2000-01-01 00:05:00+00'::timestamptz,
          'and plans its next fire after that instant, not clamped to now');

SELECT * FROM finish();
ROLLBACK;
