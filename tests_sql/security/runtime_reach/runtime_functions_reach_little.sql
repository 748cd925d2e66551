-- What a broker_runtime login can do to other tenants through its functions is kept small:
-- leases are capped, claims name the active instance, retention is maintenance only, and
-- claimed jobs go back only with their token.
BEGIN;
SELECT plan(12);

CREATE ROLE broker_test_victim NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_victim;
SELECT broker.broker_add_job('v' || i, 'SELECT 1', 1, 0) FROM generate_series(1, 3) AS i;
RESET ROLE;

SET LOCAL ROLE broker_runtime;
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, NULL, 2147483647)$$, '22023', NULL,
                 'a lease longer than an hour: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, NULL, 3601)$$, '22023', NULL, '3601 seconds: 22023');
SELECT throws_ok($$SELECT broker.broker_purge_jobs(interval '0')$$, '42501', NULL,
                 'the runtime role cannot purge jobs (retention is maintenance)');
RESET ROLE;
SELECT ok(has_function_privilege('broker_admin', 'broker.broker_purge_jobs(interval, integer, smallint)', 'EXECUTE'),
          'broker_admin can');

-- an active instance (this session); claims must name it
CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('runner') AS id;
GRANT SELECT ON inst TO broker_runtime;
SET LOCAL ROLE broker_runtime;
SELECT throws_ok($$SELECT * FROM broker.broker_get(1)$$, '55000', NULL, 'a claim without the active instance: 55000');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, (SELECT id FROM inst) + 1000)$$, '55000', NULL,
                 'a claim for another instance: 55000');
CREATE TEMP TABLE got AS SELECT * FROM broker.broker_get(1, (SELECT id FROM inst), 3600, 3);
SELECT is((SELECT count(*) FROM got), 3::bigint, 'a claim for the active instance with a lease of an hour works');

-- handing claimed jobs back: only with their lease token, attempt not counted
SELECT is((SELECT count(*) FROM broker.broker_release_jobs(
              (SELECT array_agg(job_id ORDER BY job_id) FROM got),
              (SELECT array_agg(gen_random_uuid()) FROM got))), 0::bigint, 'wrong tokens release nothing');
SELECT is((SELECT array_agg(r.job_id ORDER BY r.job_id) FROM broker.broker_release_jobs(
              (SELECT array_agg(job_id ORDER BY job_id) FROM got WHERE job_name <> 'v3'),
              (SELECT array_agg(lease_token ORDER BY job_id) FROM got WHERE job_name <> 'v3')) AS r),
          (SELECT array_agg(job_id ORDER BY job_id) FROM got WHERE job_name <> 'v3'), 'their own tokens release them');
RESET ROLE;
SELECT results_eq($$SELECT job_name, complete_status, attempts, lease_token IS NULL FROM broker.broker_jobs
                     WHERE job_name LIKE 'v_' ORDER BY job_name$$,
                  $$VALUES ('v1', 0::smallint, 0, true), ('v2', 0::smallint, 0, true), ('v3', 1::smallint, 1, false)$$,
                  'released jobs are pending again with no attempt counted; the other keeps its claim');
SET LOCAL ROLE broker_runtime;
SELECT throws_ok($$SELECT * FROM broker.broker_release_jobs(NULL, '{}')$$, '22004', NULL, 'NULL ids: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_release_jobs('{1,2}', ARRAY[gen_random_uuid()])$$, '22023', NULL,
                 'lengths differ: 22023');
RESET ROLE;

SELECT broker.broker_shutdown_instance((SELECT id FROM inst));

SELECT * FROM finish();
ROLLBACK;
