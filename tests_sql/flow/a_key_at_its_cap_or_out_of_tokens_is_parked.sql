-- Limits on concurrency keys: a cap holds from the claim to the job's end, one job of a capped key
-- per claim; the key's jobs over the cap are parked (out of the claim index) and go back when a job
-- of the key ends. A rate spends one token per job; the jobs without a token are parked until the
-- next one is due. Jobs without a key, or with a key without a limit, pass; other tenants' limits
-- do not apply, a limit across tenants does. (Token time is set, not waited for.)
BEGIN;
SELECT plan(17);

CREATE FUNCTION pg_temp.add(p_tenant text, p_n integer, p_key text, p_name text DEFAULT NULL)
RETURNS void LANGUAGE sql AS $f$
    INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, concurrency_key)
    SELECT p_tenant, COALESCE(p_name, COALESCE(p_key, 'plain')) || ' ' || i, 'g', 'SELECT 1', p_key
      FROM generate_series(1, p_n) AS i;
$f$;
CREATE FUNCTION pg_temp.claim(p_n integer) RETURNS text[] LANGUAGE sql AS $f$
    SELECT COALESCE(array_agg(COALESCE(j.concurrency_key, '-') ORDER BY g.job_id), '{}')
      FROM broker.broker_get(1, NULL, 60, p_n) AS g JOIN broker.broker_jobs AS j USING (job_id);
$f$;
CREATE FUNCTION pg_temp.running(p_key text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM broker.broker_jobs WHERE concurrency_key = p_key AND complete_status = 1;
$f$;
CREATE FUNCTION pg_temp.parked(p_key text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM broker.broker_jobs WHERE concurrency_key = p_key AND parked >= 2;
$f$;

-- a cap of 2
SELECT ok(broker.broker_set_limit('k2', 2, NULL), 'k2: at most 2 at once');
SELECT pg_temp.add('default', 6, 'k2');
SELECT pg_temp.add('default', 3, NULL);
SELECT pg_temp.add('default', 2, 'free');   -- a key without a limit
SELECT is(pg_temp.claim(20), ARRAY['k2', '-', '-', '-', 'free', 'free'],
          'one job of a capped key per claim; unkeyed jobs and keys without a limit pass');
SELECT is(pg_temp.claim(20), ARRAY['k2'], 'the next claim takes the second k2 job');
SELECT is(pg_temp.parked('k2'), 4::bigint, 'k2 is at its cap: its 4 others are parked');
SELECT is(pg_temp.claim(20), '{}'::text[], 'and the claims pass them over');
SELECT is(pg_temp.running('k2'), 2::bigint, 'two k2 jobs claimed, never more');
-- a k2 job ends: a slot frees, the parked ones go back and one is claimed
SELECT broker.broker_create_executor(current_user);
SELECT is(r.complete_status, 2::smallint, 'a k2 job completes')
  FROM broker.broker_run((SELECT min(job_id) FROM broker.broker_jobs WHERE concurrency_key = 'k2' AND complete_status = 1)) AS r;
SELECT is(pg_temp.parked('k2'), 2::bigint, 'its end put back as many parked jobs as the cap');
SELECT is(pg_temp.claim(20), ARRAY['k2'], 'a claim takes one; the cap is reached again');
SELECT is(pg_temp.running('k2'), 2::bigint, 'still two at most');

-- another tenant's limit on the same key does not apply; a limit across tenants does
SELECT pg_temp.add('other', 3, 'k2', 'other k2');
SELECT is(pg_temp.claim(20), ARRAY['k2', 'k2', 'k2'], 'tenant other has no limit on k2: all three pass');
SELECT ok(broker.broker_set_limit('shared', 1, NULL, p_all_tenants => true), 'shared: at most 1 across tenants');
SELECT pg_temp.add('default', 2, 'shared');
SELECT pg_temp.add('other', 2, 'shared');
SELECT is(pg_temp.claim(20), ARRAY['shared'], 'one shared job across both tenants');

-- a rate of 10 a second: 10 tokens, then none until one is due
SELECT ok(broker.broker_set_limit('r10', NULL, 10), 'r10: 10 starts a second, burst 10');
UPDATE broker.broker_key_limit SET tokens = 10, tokens_at = now() + interval '1 hour' WHERE concurrency_key = 'r10';  -- (no refill)
SELECT pg_temp.add('default', 40, 'r10');
SELECT is(cardinality(pg_temp.claim(100)), 10, 'the burst: 10 r10 jobs');
SELECT is(pg_temp.parked('r10'), 30::bigint, 'out of tokens: the 30 others are parked');
-- the next token is due (and an hour of refill has passed)
UPDATE broker.broker_key_limit SET tokens_at = now() - interval '1 hour', wake_at = now() - interval '1 second'
 WHERE concurrency_key = 'r10';
SELECT is(cardinality(pg_temp.claim(100)), 10, 'then a full bucket: 10 more');

SELECT * FROM finish();
ROLLBACK;
