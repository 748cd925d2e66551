-- The WHEN of broker_jobs_ready_xid_trg writes broker._claimable out (a function call there would be
-- inlined, its body parsed, at every UPDATE statement on broker_jobs). Held to the function: over every
-- old and new value of the columns it reads (every state the CHECKs allow, and a change or not of
-- each claim-order column), the trigger's condition as the server stored it and the same condition
-- with broker._claimable pick the same rows.
BEGIN;
SELECT plan(3);

CREATE TEMP TABLE v AS
SELECT cs::smallint AS complete_status, pd AS pending_deps, pk::smallint AS parked,
       q AS job_queue, p AS job_priority, t AS tenant_id, r AS run_after
  FROM generate_series(0, 4) AS cs, generate_series(0, 2) AS pd, generate_series(0, 3) AS pk,
       generate_series(1, 2) AS q, generate_series(0, 1) AS p, unnest(ARRAY['a', 'b']) AS t,
       unnest(ARRAY['2026-01-01 00:00+00', '2026-01-02 00:00+00']::timestamptz[]) AS r;

-- the stored WHEN, its NEW and OLD as the new and old rows
CREATE TEMP TABLE stored AS
SELECT regexp_replace(regexp_replace(substring(pg_get_triggerdef(t.oid) FROM 'WHEN \((.*)\) EXECUTE FUNCTION'),
                                     '\mnew\.', 'n.', 'g'), '\mold\.', 'o.', 'g') AS cond
  FROM pg_trigger AS t
 WHERE t.tgrelid = 'broker.broker_jobs'::regclass AND t.tgname = 'broker_jobs_ready_xid_trg';

SELECT doesnt_match((SELECT pg_get_triggerdef(t.oid) FROM pg_trigger AS t
                WHERE t.tgrelid = 'broker.broker_jobs'::regclass AND t.tgname = 'broker_jobs_ready_xid_trg'),
              '_claimable', 'the trigger''s WHEN calls no function (written out)');
SELECT ok((SELECT cond FROM stored) ~ 'n\.complete_status', 'its condition reads the new row');

CREATE FUNCTION pg_temp.differing() RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
    v_n bigint;
BEGIN
    -- (the old row at one place in claim order, the new one anywhere: each column changed or not)
    EXECUTE format($q$
        SELECT count(*) FROM v AS o, v AS n
         WHERE (o.job_queue, o.job_priority, o.tenant_id, o.run_after) = (1, 0, 'a', '2026-01-01 00:00+00')
           AND ((%s) IS DISTINCT FROM
                (broker._claimable(n.complete_status, n.pending_deps, n.parked)
                 AND (NOT broker._claimable(o.complete_status, o.pending_deps, o.parked)
                      OR n.job_queue <> o.job_queue OR n.job_priority <> o.job_priority
                      OR n.tenant_id <> o.tenant_id OR n.run_after <> o.run_after)))
        $q$, (SELECT cond FROM stored)) INTO v_n;
    RETURN v_n;
END;
$f$;
SELECT is(pg_temp.differing(), 0::bigint,
          'over every old and new state, the stored condition picks the rows _claimable picks');

SELECT * FROM finish();
ROLLBACK;
