-- A claim does no dependency-release work: another tenant's deferred releases (here
-- 2,000 left by a 2,500-dependent fan-in) neither change nor cost anything in a claim of an
-- empty queue; the runner's maintenance applies them (broker_apply_deferred_releases).
BEGIN;
SELECT plan(7);

-- shared buffers (hit + read) a claim of queue q touches, function body included
CREATE FUNCTION pg_temp.claim_buffers(q integer) RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE v_plan json;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker.broker_get(%s)', q) INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::integer + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::integer;
END $f$;

SELECT broker.broker_set_tenant('tenant_a');
SELECT broker.broker_add_job('member', 'SELECT 1', 1, p_job_group => 'big');
SELECT count(*) FROM broker.broker_add_jobs((
    SELECT jsonb_agg(jsonb_build_object('job_name', 'dep ' || i, 'execute_str', 'SELECT 1', 'job_queue', 9,
                                        'depends_on_groups', '["big"]'::jsonb))
      FROM generate_series(1, 2500) AS i));

-- tenant_b's claims of its empty queue, with nothing deferred
SELECT broker.broker_set_tenant('tenant_b');
SELECT pg_temp.claim_buffers(8), pg_temp.claim_buffers(8);   -- warm caches
-- (the fewest of three: a claim right after another session's catalog change reads a few catalog
-- pages again, which is no work of the claim's own)
SELECT LEAST(pg_temp.claim_buffers(8), pg_temp.claim_buffers(8), pg_temp.claim_buffers(8)) AS quiet \gset

-- tenant_a's member completes: 2,000 releases deferred
SELECT count(*) FROM broker.broker_get(1) AS g, LATERAL broker.broker_run(g.job_id) AS r;
SELECT is((SELECT sum(cardinality(job_ids)) FROM broker.broker_deferred_release)::integer, 2000, '2,000 releases deferred');

SELECT LEAST(pg_temp.claim_buffers(8), pg_temp.claim_buffers(8), pg_temp.claim_buffers(8)) AS busy \gset
SELECT is((SELECT sum(cardinality(job_ids)) FROM broker.broker_deferred_release)::integer, 2000,
          'a claim of another queue applies none of them');
SELECT is((SELECT count(*) FROM broker.broker_get(9)), 1::bigint, 'a claim of their queue claims one of the 500 released at once');
SELECT is((SELECT sum(cardinality(job_ids)) FROM broker.broker_deferred_release)::integer, 2000,
          'and applies none of the deferred ones either');
SELECT cmp_ok(:busy, '<=', :quiet + 2,
              format('a claim touches as many buffers with 2,000 releases deferred as with none (%s, %s)', :busy, :quiet));

-- the maintenance function applies them, a bounded amount per call
SELECT is(broker.broker_apply_deferred_releases(1500), 1500, 'broker_apply_deferred_releases(1500) applies 1,500');
SELECT is(broker.broker_apply_deferred_releases() + broker.broker_apply_deferred_releases(), 500,
          'then the last 500, and nothing is left');

SELECT * FROM finish();
ROLLBACK;
