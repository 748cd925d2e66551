-- Limits on concurrency keys and weights, for roles without BYPASSRLS: a tenant sets, sees and removes only its
-- own limits, and they hold back only its own jobs; it cannot set a limit across tenants or any weight, nor
-- write the limit rows' bookkeeping of another tenant; it reads its own weight only.
BEGIN;
SELECT plan(15);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_set_tenant_weight('tenant_a', 5);
SELECT broker.broker_set_tenant_weight('tenant_b', 2);

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_a');
SELECT ok(broker.broker_set_limit('api', 1, NULL), 'A sets a cap of 1 on its key api');
SELECT is((SELECT array_agg(weight) FROM broker.broker_tenant_weight), ARRAY[5], 'A reads its own weight only');
SELECT throws_ok($$SELECT broker.broker_set_limit('api', 1, NULL, p_all_tenants => true)$$, '42501', NULL,
                 'A cannot set a limit across tenants');
SELECT throws_ok($$SELECT broker.broker_set_tenant_weight('tenant_a', 1000)$$, '42501', NULL, 'A cannot set its weight');
SELECT throws_ok($$SELECT broker.broker_set_limit(' ', 1, NULL)$$, '22023', NULL, 'a blank key: 22023');
SELECT throws_ok($$SELECT broker.broker_set_limit('api', 0, NULL)$$, '22023', NULL, 'a cap of 0: 22023');
SELECT throws_ok($$SELECT broker.broker_set_limit('api', NULL, -1)$$, '22023', NULL, 'a negative rate: 22023');
RESET ROLE;

SET LOCAL ROLE broker_test_bob;
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_key_limit), 0::bigint, 'B sees none of A''s limits');
SELECT is_empty($$UPDATE broker.broker_key_limit SET max_running = 100 WHERE concurrency_key = 'api' RETURNING 1$$,
                'B cannot change A''s limit');
SELECT ok(NOT broker.broker_set_limit('api', NULL, NULL), 'B "removes" its own limit on api: there was none');
RESET ROLE;
SELECT is((SELECT max_running FROM broker.broker_key_limit WHERE tenant_id = 'tenant_a' AND concurrency_key = 'api'), 1,
          'A''s limit is as A set it');

-- B's jobs with key api are not held back by A's cap
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, concurrency_key, job_queue)
SELECT t, t || ' ' || i, 'g', 'SELECT 1', 'api', 7 FROM unnest(ARRAY['tenant_a', 'tenant_b']) AS t, generate_series(1, 3) AS i;
SELECT results_eq($$SELECT tenant_id, count(*) FROM broker.broker_get(7, NULL, 60, 10) GROUP BY 1 ORDER BY 1$$,
                  $$VALUES ('tenant_a', 1::bigint), ('tenant_b', 3::bigint)$$,
                  'A''s cap holds back A''s api jobs only');

-- B cannot put A's parked jobs back into the claim index (which would make A's claims park them again)
UPDATE broker.broker_jobs SET parked = 2 WHERE tenant_id = 'tenant_a' AND complete_status = 0;
SET LOCAL ROLE broker_test_bob;
SELECT broker.broker_set_tenant('tenant_b');
SELECT throws_ok($$SELECT broker._unpark_key('tenant_a', 'api')$$, '42501', NULL, 'B may not call the unparking');
SELECT ok(broker.broker_set_limit('api', 5, NULL), 'B sets its own limit on api');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'tenant_a' AND parked = 2), 2::bigint,
          'A''s parked jobs stay parked: B''s limit unparks only B''s');

SELECT * FROM finish();
ROLLBACK;
