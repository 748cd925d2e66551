-- A tenant may not create schedules without bound (each costs every tick): max_schedules_per_tenant
-- (default 1,000) holds for broker_add_schedule and for raw INSERTs alike, per tenant.
BEGIN;
SELECT plan(8);
SET LOCAL client_min_messages = warning;

CREATE ROLE broker_test_flooder NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_flooder;
SELECT broker.broker_set_tenant('flood');
SELECT lives_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str)
                  SELECT 's' || i, '* * * * *', 'SELECT 1' FROM generate_series(1, 1000) AS i$$,
                'a tenant may have 1,000 schedules');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str)
                   VALUES ('one too many', '* * * * *', 'SELECT 1')$$, '53400',
                 'tenant ''flood'' already has 1000 schedules, the most it may have',
                 'a raw INSERT of the 1,001st is refused with 53400');
SELECT throws_ok($$SELECT broker.broker_add_schedule('one too many', '* * * * *', 'SELECT 1')$$, '53400', NULL,
                 '... and so is broker_add_schedule');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str)
                   SELECT 'x' || i, '* * * * *', 'SELECT 1' FROM generate_series(1, 5000) AS i$$, '53400', NULL,
                 'a flood in one statement stops at the quota');
SELECT broker.broker_set_tenant('other');
SELECT lives_ok($$SELECT broker.broker_add_schedule('mine', '* * * * *', 'SELECT 1')$$,
                'another tenant of the same role still has its own quota');
SELECT throws_ok($$SELECT broker.broker_set('max_schedules_per_tenant', '5000')$$, '42501', NULL,
                 'an enqueuer cannot raise the quota');
RESET ROLE;
SELECT is(broker.broker_set('max_schedules_per_tenant', '1001'), '1001', 'an administrator can');
SET LOCAL ROLE broker_test_flooder;
SELECT broker.broker_set_tenant('flood');
SELECT lives_ok($$SELECT broker.broker_add_schedule('one more', '* * * * *', 'SELECT 1')$$, '... and then one more fits');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
