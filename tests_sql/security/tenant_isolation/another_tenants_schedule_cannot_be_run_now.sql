-- Under strict tenancy, broker_run_schedule_now reaches only the schedules of the caller's mapped tenants:
-- mallory, a broker_enqueue member mapped to tenant_m who knows the name of tenant_v's schedule, tries every
-- way to name tenant_v (p_tenant_id, broker_set_tenant, the GUC itself) and finds no such schedule; a schedule
-- of the same name in her own tenant is the one she runs. The column run now writes (last_job_id) cannot be
-- aimed at tenant_v either: her own schedule pointed at tenant_v's pending job does not read its state.
BEGIN;
SELECT plan(11);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_victor NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name)
VALUES ('tenant_v', 'broker_test_victor'), ('tenant_m', 'broker_test_mallory');

SET LOCAL ROLE broker_test_victor;
SELECT broker.broker_add_schedule('payroll', '0 3 * * *', 'SELECT ''victor''', p_tenant_id => 'tenant_v');
SELECT broker.broker_add_job('victor''s pending job', 'SELECT 1', p_tenant_id => 'tenant_v');
RESET ROLE;
CREATE TEMP TABLE victim AS
    SELECT (SELECT job_id FROM broker.broker_jobs WHERE tenant_id = 'tenant_v') AS job_id,
           (SELECT schedule_id FROM broker.broker_schedule WHERE tenant_id = 'tenant_v') AS schedule_id;
GRANT SELECT ON victim TO PUBLIC;

SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('payroll', 'tenant_v')$$, '42704',
    'broker_run_schedule_now: schedule ''payroll'' does not exist in tenant ''tenant_v''',
    'p_tenant_id naming tenant v: no such schedule');
SELECT broker.broker_set_tenant('tenant_v');
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('payroll')$$, '42704', NULL,
    'after broker_set_tenant(tenant v): no such schedule');
SELECT set_config('broker.tenant_id', 'tenant_v', true);
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('payroll')$$, '42704', NULL,
    'with the GUC set by hand: no such schedule');
SELECT broker.broker_set_tenant('tenant_m');
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('payroll')$$, '42704',
    'broker_run_schedule_now: schedule ''payroll'' does not exist in tenant ''tenant_m''',
    'in her own tenant: no such schedule');

-- a schedule of the same name in her tenant: hers runs
SELECT broker.broker_add_schedule('payroll', '0 3 * * *', 'SELECT ''mallory''');
CREATE TEMP TABLE ran AS SELECT * FROM broker.broker_run_schedule_now('payroll');
SELECT is((SELECT execute_str FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran)), 'SELECT ''mallory''',
          'the schedule of that name in her own tenant is the one run');

-- last_job_id: tenant v's schedule is out of reach; hers pointed at tenant v's pending job reads nothing of it
SELECT is_empty($$UPDATE broker.broker_schedule SET last_job_id = NULL
                   WHERE schedule_id = (SELECT schedule_id FROM victim) RETURNING 1$$,
                'she cannot write tenant v''s schedule');
UPDATE broker.broker_schedule SET last_job_id = (SELECT job_id FROM victim) WHERE schedule_name = 'payroll';
SELECT is((SELECT is_new FROM broker.broker_run_schedule_now('payroll')), true,
          'run now (overlap skip) reads nothing of tenant v''s pending job: a new job');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE enqueued_by = 'broker_test_mallory'), 2::bigint,
          'mallory''s two runs are in her tenant, in her name');
RESET ROLE;
-- the tick at a fixed instant, with only her schedule due
UPDATE broker.broker_schedule SET next_fire_at = '2027-06-16 03:00+00' WHERE tenant_id = 'tenant_v';
UPDATE broker.broker_schedule SET last_job_id = (SELECT job_id FROM victim), next_fire_at = '2027-06-15 03:00+00'
 WHERE tenant_id = 'tenant_m';
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at('2027-06-15 03:00:10+00')), 1,
          'nor does the tick: her fire is not skipped for tenant v''s pending job');

-- tenant v: no job but its own, its schedule's last job untouched
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'tenant_v'), 1::bigint,
          'tenant v has only its own job');
SELECT is((SELECT last_job_id FROM broker.broker_schedule WHERE tenant_id = 'tenant_v'), NULL,
          'tenant v''s schedule has no last job');

SELECT * FROM finish();
ROLLBACK;
