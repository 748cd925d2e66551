-- broker_add_job stores what it is given, with the documented defaults.
BEGIN;
SELECT plan(22);

CREATE TEMP TABLE ids AS SELECT * FROM broker.broker_add_job('extract orders', 'SELECT 1');
SELECT is((SELECT is_new FROM ids), true, 'a new job reports is_new');
SELECT results_eq(
    $$SELECT job_name, job_group, job_queue, job_priority, job_language, run_as::text, enqueued_by::text,
             max_attempts, attempts, complete_status, pending_deps, tenant_id, idempotency_key, schedule_id,
             job_timeout
        FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ids)$$,
    $$VALUES ('extract orders', 'extract orders', 1, 0, 'sql', current_user::text, current_user::text,
              1, 0, 0::smallint, 0, 'default', NULL::text, NULL::bigint, NULL::interval)$$,
    'defaults: queue 1, priority 0, sql, run_as = enqueuer, group = name, tenant default');
SELECT ok((SELECT run_after <= now() AND created_at = now() FROM broker.broker_jobs
            WHERE job_id = (SELECT job_id FROM ids)), 'runnable now, created now');

CREATE TEMP TABLE ids2 AS SELECT * FROM broker.broker_add_job(
    'load', 'BEGIN PERFORM 1; END', 3, 7, 'PLpgSQL', current_user, NULL, NULL, 'key-1', 4, 'loaders', NULL,
    now() + interval '1 hour', interval '30 seconds');
SELECT results_eq(
    $$SELECT job_queue, job_priority, job_language, max_attempts, job_group, idempotency_key, job_timeout,
             run_after = now() + interval '1 hour'
        FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ids2)$$,
    $$VALUES (3, 7, 'plpgsql', 4, 'loaders', 'key-1', interval '30 seconds', true)$$,
    'every parameter is stored; language is case-insensitive; trailing p_run_after and p_timeout');
SELECT is((SELECT job_id FROM ids2) > (SELECT job_id FROM ids), true, 'job ids increase');

-- simple variant
CREATE TEMP TABLE ids3 AS SELECT * FROM broker.broker_add_job_simple('transform', 'SELECT 2', 5, ARRAY['extract orders']);
SELECT results_eq(
    $$SELECT job_queue, job_priority, job_language, max_attempts, job_group, pending_deps
        FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ids3)$$,
    $$VALUES (1, 5, 'sql', 1, 'transform', 1)$$,
    'simple: queue 1, given priority, waits on the group');
SELECT is((SELECT count(*) FROM broker.broker_job_dependency WHERE job_id = (SELECT job_id FROM ids3)
             AND depends_on_group = 'extract orders'), 1::bigint, 'simple: group edge stored');
SELECT is((SELECT job_id FROM broker.broker_add_job_simple('plain', 'SELECT 3')) IS NOT NULL, true,
          'simple: name and SQL alone');

-- dependency arrays are de-duplicated
CREATE TEMP TABLE ids4 AS SELECT * FROM broker.broker_add_job('dup', 'SELECT 1',
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM ids), (SELECT job_id FROM ids)],
    p_depends_on_groups => ARRAY['loaders', 'loaders']);
SELECT is((SELECT count(*) FROM broker.broker_job_dependency WHERE job_id = (SELECT job_id FROM ids4)), 2::bigint,
          'duplicate dependencies are stored once');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ids4)), 2,
          'one unfinished id target + one unfinished group member');

-- run_as: self and a role we are a member of (as a member of broker_enqueue)
CREATE ROLE broker_test_member NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_other NOLOGIN;
CREATE ROLE broker_test_enqueuer NOLOGIN IN ROLE broker_test_member, broker_enqueue;
SET LOCAL ROLE broker_test_enqueuer;
SELECT lives_ok($$SELECT broker.broker_add_job('as member', 'SELECT 1', p_run_as => 'broker_test_member')$$,
    'run_as a role the enqueuer is a member of');
SELECT throws_ok($$SELECT broker.broker_add_job('as other', 'SELECT 1', p_run_as => 'broker_test_other')$$,
    '42501', NULL, 'run_as a role the enqueuer is not a member of: 42501');
SELECT throws_ok($$SELECT broker.broker_add_job('as su', 'SELECT 1', p_run_as => 'postgres')$$,
    '42501', NULL, 'run_as a superuser from a non-superuser: 42501');
CREATE TEMP TABLE ids5 AS SELECT * FROM broker.broker_add_job('as me', 'SELECT 1');
RESET ROLE;
SELECT is((SELECT run_as || '/' || enqueued_by FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ids5)),
    'broker_test_enqueuer/broker_test_enqueuer', 'run_as defaults to the enqueuing role');
SELECT is((SELECT run_as::text FROM broker.broker_jobs WHERE job_name = 'as member'), 'broker_test_member',
          'explicit run_as stored');

-- a superuser may name any role
SELECT lives_ok($$SELECT broker.broker_add_job('su as other', 'SELECT 1', p_run_as => 'broker_test_other')$$,
    'a superuser may run jobs as any role');

-- queue numbers above 1 and negative priorities are fine
SELECT lives_ok($$SELECT broker.broker_add_job('q9', 'SELECT 1', 9, -5)$$, 'queue 9, priority -5');
SELECT is((SELECT job_priority FROM broker.broker_jobs WHERE job_name = 'q9'), -5, 'negative priority stored');

-- a job may enqueue follow-up jobs: the function is usable from job SQL
SELECT lives_ok($$SELECT broker.broker_add_job('parent', 'SELECT broker.broker_add_job(''child'', ''SELECT 1'')')$$,
    'jobs can contain broker_add_job calls');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'child'), 0::bigint, 'children not yet created');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 10::bigint, 'ten jobs enqueued in this test');
SELECT is((SELECT count(DISTINCT tenant_id) FROM broker.broker_jobs), 1::bigint, 'all in one tenant');

SELECT * FROM finish();
ROLLBACK;
