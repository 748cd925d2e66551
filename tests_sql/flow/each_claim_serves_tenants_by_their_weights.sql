-- Fair share: each claim serves the tenants that have claimable jobs in a queue in proportion to
-- their weights; priority orders a tenant's own jobs; one tenant's order is priority, then age;
-- a tenant with fewer jobs than its share leaves the rest to the others.
BEGIN;
SELECT plan(11);

CREATE FUNCTION pg_temp.add(p_tenant text, p_n integer, p_priority integer DEFAULT 0, p_queue integer DEFAULT 1)
RETURNS void LANGUAGE sql AS $f$
    INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority, job_queue)
    SELECT p_tenant, p_tenant || ' ' || i, p_tenant, 'SELECT 1', p_priority, p_queue FROM generate_series(1, p_n) AS i;
$f$;
CREATE FUNCTION pg_temp.claim(p_n integer, p_queue integer DEFAULT 1) RETURNS TABLE (tenant_id text, n bigint)
LANGUAGE sql AS $f$
    SELECT g.tenant_id, count(*) FROM broker.broker_get(p_queue, NULL, 60, p_n) AS g GROUP BY 1 ORDER BY 1;
$f$;

-- one tenant: priority, then age
SELECT pg_temp.add('solo', 3, 0, 5);
SELECT pg_temp.add('solo', 2, 7, 5);
SELECT results_eq($$SELECT job_name, job_priority FROM broker.broker_get(5, NULL, 60, 5)$$,
                  $$VALUES ('solo 1', 7), ('solo 2', 7), ('solo 1', 0), ('solo 2', 0), ('solo 3', 0)$$,
                  'one tenant: highest priority first, then oldest');

-- a flood at the top priority and 50 jobs at priority 0 of another tenant: halves
SELECT pg_temp.add('a', 2000, 100);
SELECT pg_temp.add('b', 50, 0);
SELECT results_eq($$SELECT * FROM pg_temp.claim(10)$$, $$VALUES ('a', 5::bigint), ('b', 5::bigint)$$,
                  'equal weights: a claim of 10 takes 5 of each, whatever their priorities');
SELECT results_eq($$SELECT * FROM pg_temp.claim(100)$$, $$VALUES ('a', 55::bigint), ('b', 45::bigint)$$,
                  'b has 45 left, fewer than its share: a takes the rest of the claim');
SELECT results_eq($$SELECT * FROM pg_temp.claim(100)$$, $$VALUES ('a', 100::bigint)$$,
                  'b has none left: a takes the whole claim');

-- weights 3 and 1
SELECT pg_temp.add('b', 500, 0);
SELECT is(broker.broker_set_tenant_weight('a', 3), 3, 'a weighs 3');
SELECT results_eq($$SELECT * FROM pg_temp.claim(100)$$, $$VALUES ('a', 75::bigint), ('b', 25::bigint)$$,
                  'weights 3 and 1: 75 and 25 of a claim of 100');
-- claims of one job: the remainder moves from claim to claim, by weight
CREATE TEMP TABLE ones AS SELECT (broker.broker_get(1, NULL, 60, 1)).tenant_id FROM generate_series(1, 200);
SELECT ok((SELECT count(*) FILTER (WHERE tenant_id = 'a')::numeric / count(*) BETWEEN 0.7 AND 0.8 FROM ones),
          'claims of one job each: a''s share of 200 is 0.7 to 0.8');
SELECT is(broker.broker_set_tenant_weight('a', NULL), 1, 'a weighs 1 again');

-- a paused tenant takes no share; another queue is not touched
INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (1, 'b');   -- (as b's broker_pause_queue(1))
SELECT results_eq($$SELECT * FROM pg_temp.claim(10)$$, $$VALUES ('a', 10::bigint)$$, 'b paused: a takes the whole claim');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 5 AND complete_status = 0), 0::bigint,
          'queue 5 was claimed by its own claims only');

-- weights are for administrators, 1 to 1000
SELECT throws_ok($$SELECT broker.broker_set_tenant_weight('a', 0)$$, '22023', NULL, 'weight 0: 22023');

SELECT * FROM finish();
ROLLBACK;
