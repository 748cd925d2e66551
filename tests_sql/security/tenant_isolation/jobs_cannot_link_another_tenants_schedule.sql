-- A job cannot point at another tenant's schedule (nor learn whether it exists).
BEGIN;
SELECT plan(2);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;

CREATE TEMP TABLE acme_schedule AS
WITH s AS (INSERT INTO broker.broker_schedule (tenant_id, schedule_name, cron_expr, execute_str)
           VALUES ('acme', 'acme nightly', '0 3 * * *', 'SELECT 1') RETURNING schedule_id)
SELECT schedule_id FROM s;
GRANT SELECT ON acme_schedule TO broker_test_mallory;
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('evil');
SELECT throws_ok(format($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, schedule_id) VALUES ('x', 'x', 'SELECT 1', %s)$$,
                        (SELECT schedule_id FROM acme_schedule)),
    '23503', NULL, 'another tenant''s schedule id is refused like a missing one');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'x'), 0::bigint, 'no job was linked');

SELECT * FROM finish();
ROLLBACK;
