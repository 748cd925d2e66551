-- Task names are one namespace per database (a name has one queue, whatever tenants use it), but
-- a tenant sees only the names it uses itself, as an attacker of another tenant would check: the
-- names another tenant enqueued, scheduled or paused are not in broker_task_queue for it, whether
-- it reads the table, the list of names used, or sets the other tenant under strict tenancy. A name
-- is recorded as the tenant's that the call names (p_tenant_id), only when the enqueue holds, and
-- an administrator's pause for every tenant is no tenant's use.
BEGIN;
SELECT plan(16);

CREATE ROLE broker_test_names_a NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_names_b NOLOGIN IN ROLE broker_enqueue;

SET LOCAL SESSION AUTHORIZATION broker_test_names_b;
SELECT broker.broker_set_tenant('b');
SELECT broker.broker_add_task('b_merger_talks', '{}');
SELECT broker.broker_add_task_schedule('b_nightly', '0 3 * * *', 'b_payroll_export');
SELECT broker.broker_pause_task('b_layoff_letters');
SELECT broker.broker_add_task('shared', '{}');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue ORDER BY 1),
          ARRAY['b_layoff_letters', 'b_merger_talks', 'b_payroll_export', 'shared'],
          'b sees the names it enqueued, scheduled and paused');
RESET SESSION AUTHORIZATION;

SET LOCAL SESSION AUTHORIZATION broker_test_names_a;
SELECT broker.broker_set_tenant('a');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue), '{}'::text[], 'a tenant that uses no name sees none of b''s');
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant), 0::bigint, 'nor any of b''s uses');
SELECT broker.broker_add_task('a_render', '{}');
SELECT broker.broker_add_jobs('[{"task": "a_batch"}]');
SELECT broker.broker_add_task('shared', '{}');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue ORDER BY 1), ARRAY['a_batch', 'a_render', 'shared'],
          'a sees the names it uses, from every enqueue path, and none of b''s');
SELECT is((SELECT job_queue FROM broker.broker_task_queue WHERE task_name = 'shared'),
          (SELECT job_queue FROM broker.broker_jobs WHERE job_name = 'shared'),
          'a name both use is one queue, the one a''s task is in');
SELECT is((SELECT count(*) FROM broker.broker_task_queue WHERE task_name LIKE 'b%'), 0::bigint,
          'b''s names stay out of a lookup by name');
RESET SESSION AUTHORIZATION;

-- strict tenancy: a role mapped to a that names b sees nothing of b's
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('a', 'broker_test_names_a'), ('b', 'broker_test_names_b');
SET LOCAL SESSION AUTHORIZATION broker_test_names_a;
SELECT broker.broker_set_tenant('b');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue), '{}'::text[],
          'under strict tenancy, a''s role that sets tenant b sees none of b''s names');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task('b_merger_talks', '{}')$$, '42501', NULL,
                 'and cannot enqueue in b to make one its own');
SELECT broker.broker_set_tenant('a');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task('b_merger_talks', '{}', p_tenant_id => 'b')$$, '42501', NULL,
                 'nor name b in the call');
SELECT broker.broker_set_tenant('b');
SELECT broker._task_queue('x', 'planted_in_b', true);
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant WHERE tenant_id = 'a' AND task_name LIKE 'b%'), 0::bigint,
          'the refused enqueues recorded no use for a');
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant WHERE task_name = 'planted_in_b'), 0::bigint,
          'and a''s role, calling the recorder itself with tenant b set, records no name as b''s');
SELECT broker.broker_set_strict_tenancy(false);

-- the call's tenant is the one recorded; a failed enqueue records nothing
SELECT broker.broker_set_tenant('default');
SELECT broker.broker_add_task('c_only', '{}', p_tenant_id => 'c');
SELECT is(ARRAY(SELECT tenant_id FROM broker.broker_task_name_tenant WHERE task_name = 'c_only'), ARRAY['c'],
          'a task enqueued with p_tenant_id is a use of the tenant it names, not of the session''s');
SELECT is(broker.broker_current_tenant(), 'default', 'and the session''s tenant is as it was after the call');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task('ghost', NULL)$$, '22004', NULL, 'an enqueue that fails ...');
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant WHERE task_name = 'ghost'), 0::bigint,
          '... records no use');

-- an administrator's pause is for every tenant, no tenant's use
SELECT broker.broker_pause_task('admin_wide');
SELECT is((SELECT count(*) FROM broker.broker_task_name_tenant WHERE task_name = 'admin_wide'), 0::bigint,
          'an administrator''s pause of a name records no tenant''s use');

SELECT * FROM finish();
ROLLBACK;
