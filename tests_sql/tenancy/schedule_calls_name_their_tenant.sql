-- p_tenant_id of broker_alter_schedule, broker_enable_schedule and broker_remove_schedule: the tenant of that
-- call only (the transaction's own tenant is as it was after it), held to broker_set_tenant's rules; a schedule
-- of the same name in the transaction's tenant is left alone; under strict tenancy an unmapped tenant shows
-- nothing to change.
BEGIN;
SELECT plan(16);

CREATE ROLE broker_test_sam NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_sam;
SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1', p_tenant_id => 'tenant_a');
SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1');  -- the same name in default

CREATE TEMP TABLE altered AS
    SELECT * FROM broker.broker_alter_schedule('nightly', p_cron_expr => '0 4 * * *', p_tenant_id => 'tenant_a');
SELECT is((SELECT count(*) FROM altered), 1::bigint, 'broker_alter_schedule: it changed one schedule');
SELECT is(broker.broker_current_tenant(), 'default', 'broker_alter_schedule: the transaction''s tenant is as it was');
SELECT is((SELECT cron_expr FROM broker.broker_schedule WHERE schedule_name = 'nightly'), '0 3 * * *',
          'the default tenant''s schedule of that name is unchanged');

SELECT is(broker.broker_enable_schedule('nightly', false, p_tenant_id => 'tenant_a'), NULL,
          'broker_enable_schedule: disabled in the named tenant');
SELECT is(broker.broker_current_tenant(), 'default', 'broker_enable_schedule: the transaction''s tenant is as it was');
SELECT is((SELECT enabled FROM broker.broker_schedule WHERE schedule_name = 'nightly'), true,
          'the default tenant''s schedule is still enabled');

SELECT broker._set_tenant('test', 'tenant_a');
SELECT is((SELECT cron_expr || ' ' || enabled FROM broker.broker_schedule WHERE schedule_name = 'nightly'),
          '0 4 * * * false', 'tenant a''s schedule was altered and disabled');
SELECT broker._set_tenant('test', 'default');

SELECT is(broker.broker_remove_schedule('nightly', p_tenant_id => 'tenant_a'), true,
          'broker_remove_schedule: removed from the named tenant');
SELECT is(broker.broker_current_tenant(), 'default', 'broker_remove_schedule: the transaction''s tenant is as it was');
SELECT is((SELECT count(*) FROM broker.broker_schedule WHERE schedule_name = 'nightly'), 1::bigint,
          'the default tenant''s schedule stays');
SELECT is(broker.broker_remove_schedule('nightly', true, p_tenant_id => 'tenant_a'), false,
          'p_missing_ok looks in the named tenant too');
SELECT is(broker.broker_current_tenant(), 'default', 'and puts the transaction''s tenant back on that path too');

-- the values broker_set_tenant refuses, with its SQLSTATEs
SELECT throws_ok($$SELECT broker.broker_alter_schedule('nightly', p_tenant_id => ' ')$$, '22023',
    'broker_alter_schedule: tenant id must be 1 to 200 characters and not blank', 'broker_alter_schedule: a blank tenant is 22023');
SELECT throws_ok($$SELECT broker.broker_enable_schedule('nightly', p_tenant_id => '')$$, '22023',
    'broker_enable_schedule: tenant id must be 1 to 200 characters and not blank', 'broker_enable_schedule: an empty tenant is 22023');

-- strict tenancy: a tenant sam is not mapped to shows nothing to change
SELECT broker.broker_add_schedule('hourly', '0 * * * *', 'SELECT 1', p_tenant_id => 'tenant_b');
RESET ROLE;
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('default', 'broker_test_sam');
SET LOCAL ROLE broker_test_sam;
SELECT throws_ok($$SELECT broker.broker_remove_schedule('hourly', p_tenant_id => 'tenant_b')$$, '42704',
    'broker_remove_schedule: schedule ''hourly'' does not exist in tenant ''tenant_b''',
    'an unmapped tenant''s schedule is not there for sam');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_schedule WHERE schedule_name = 'hourly'), 1::bigint,
          'tenant b''s schedule stays');

SELECT * FROM finish();
ROLLBACK;
