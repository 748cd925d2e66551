-- A tenant reads its own finished counts (broker_finished_count, behind the last hour of
-- `pgsql-broker status` as its login), never another tenant's: not with its own tenant set, not by
-- setting the other's under strict tenancy, and it writes none.
BEGIN;
SELECT plan(5);

CREATE ROLE broker_test_counts_a NOLOGIN IN ROLE broker_enqueue;
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, complete_status, started_at, finished_at)
SELECT t, 'done', 'done', 'SELECT 1', 2, now(), now() FROM unnest(ARRAY['a', 'b', 'b']) AS t;

SET LOCAL SESSION AUTHORIZATION broker_test_counts_a;
SELECT broker.broker_set_tenant('a');
SELECT is((SELECT array_agg(DISTINCT tenant_id) FROM broker.broker_finished_count), ARRAY['a'],
          'a reads only its own counts');
SELECT is((SELECT sum(jobs) FROM broker.broker_finished_count), 1::numeric, 'and they count its one job');
SELECT throws_ok($$INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
                   VALUES (now(), 1, 'a', 2, 1000)$$, '42501', NULL, 'it writes no count');
RESET SESSION AUTHORIZATION;

SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('a', 'broker_test_counts_a');
SET LOCAL SESSION AUTHORIZATION broker_test_counts_a;
SELECT broker.broker_set_tenant('b');
SELECT is((SELECT count(*) FROM broker.broker_finished_count), 0::bigint,
          'under strict tenancy, a''s role that sets tenant b reads none of b''s counts');
SELECT broker.broker_set_tenant('a');
SELECT is((SELECT sum(jobs) FROM broker.broker_finished_count), 1::numeric, 'and its own as before');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
