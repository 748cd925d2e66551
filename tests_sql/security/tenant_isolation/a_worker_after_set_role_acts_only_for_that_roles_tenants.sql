-- Strict tenancy and SET ROLE: a login that serves several tenants' tasks (a pool member of each
-- tenant's worker role) narrows itself to one with SET ROLE, as it would for any other broker
-- function, whose policies check the current role. The task functions (SECURITY DEFINER) checked the
-- session's login instead, so after SET ROLE worker_a the session still claimed, renewed, completed,
-- failed and handed back tenant b's tasks. They now check the role set (SET ROLE), else the login.
BEGIN;
SELECT plan(9);

CREATE ROLE broker_test_worker_a NOLOGIN IN ROLE broker_worker;
CREATE ROLE broker_test_worker_b NOLOGIN IN ROLE broker_worker;
CREATE ROLE broker_test_pool NOLOGIN IN ROLE broker_test_worker_a, broker_test_worker_b;
CREATE ROLE broker_test_enq NOLOGIN IN ROLE broker_enqueue;
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name)
VALUES ('a', 'broker_test_worker_a'), ('b', 'broker_test_worker_b'), ('a', 'broker_test_enq'), ('b', 'broker_test_enq');
SELECT broker.broker_set_strict_tenancy(true);

SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_add_task('render', '{"for": "a"}', p_tenant_id => 'a');
SELECT broker.broker_add_task('render', '{"for": "b"}', p_tenant_id => 'b');
RESET SESSION AUTHORIZATION;
-- b's task claimed by b's own worker; its token is what the pool session would misuse
CREATE TEMP TABLE b_claim AS SELECT * FROM broker.broker_claim_tasks(ARRAY['render']) WHERE false;
GRANT SELECT, INSERT ON b_claim TO PUBLIC;
SET LOCAL SESSION AUTHORIZATION broker_test_worker_b;
SELECT broker.broker_set_tenant('b');
INSERT INTO b_claim SELECT * FROM broker.broker_claim_tasks(ARRAY['render']);
RESET SESSION AUTHORIZATION;

SET LOCAL SESSION AUTHORIZATION broker_test_pool;
SET LOCAL ROLE broker_test_worker_a;
SELECT broker.broker_set_tenant('b');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render'])$$, '42501',
                 'broker_claim_tasks: role broker_test_worker_a may not act for tenant ''b''',
                 'after SET ROLE worker_a the session claims nothing of tenant b');
SELECT throws_ok(format('SELECT broker.broker_extend_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 '42501', NULL, 'nor renews b''s task');
SELECT throws_ok(format('SELECT broker.broker_complete_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 '42501', NULL, 'nor completes it');
SELECT throws_ok(format('SELECT broker.broker_fail_task(%s, %L, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim), 'x'),
                 '42501', NULL, 'nor fails it');
SELECT throws_ok(format('SELECT broker.broker_release_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 '42501', NULL, 'nor hands it back');
SELECT broker.broker_set_tenant('a');
SELECT is(ARRAY(SELECT args->>'for' FROM broker.broker_claim_tasks(ARRAY['render'])), ARRAY['a'],
          'for its own tenant it claims');
-- without SET ROLE the login acts for every tenant its roles are mapped to, as before
RESET ROLE;
SELECT broker.broker_set_tenant('b');
SELECT is(broker.broker_extend_task((SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)), 'extended',
          'RESET ROLE: the login, a member of b''s worker role, acts for b');
SET LOCAL ROLE broker_test_worker_b;
SELECT is(broker.broker_complete_task((SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)), true,
          'SET ROLE worker_b: acts for b');
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT broker.broker_set_tenant('b');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM b_claim)), 2::smallint,
          'b''s task was completed once, by a session acting for b');

SELECT * FROM finish();
ROLLBACK;
