-- sql/flow/keys.sql: what a claim may take of jobs with a concurrency key, and parking the rest.

-- ---------------------------------------------------------------------------
-- Type: broker._claim_candidate
--   A job a claim looked at (in claim order) before it locks any: its id,
--   its concurrency key, its run_after (where the next look starts) and the
--   row version it saw (row_tid: the lock fetches that version directly,
--   with no index descent; a version updated since is skipped, or rechecked
--   when it was updated after the lock's snapshot).
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_candidate AS (
    job_id          bigint,
    concurrency_key text,
    run_after       timestamptz,
    row_tid         tid
);
COMMENT ON TYPE broker._claim_candidate IS
    'Internal: a job a claim looked at before locking it (id, concurrency key, run_after and the row version seen).';

-- ---------------------------------------------------------------------------
-- Type: broker._claim_keys
--   What a claim did under the keys' limits so far, across its tenants: the
--   capped keys it took a job of (taken, once per job), and how many jobs it
--   parked (parked: at most 1,000 a claim).
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_keys AS (
    taken  text[],
    parked integer
);
COMMENT ON TYPE broker._claim_keys IS
    'Internal: a claim''s dealings with the keys'' limits so far (capped keys it took a job of, jobs it parked).';

-- ---------------------------------------------------------------------------
-- Function: broker._admit_keyed(p_tenant_id, p_candidates, p_keys, p_now, p_want)
--   For a claim of tenant p_tenant_id's jobs: which of p_candidates (in claim
--   order) it may take under the limits on their concurrency keys
--   (broker_key_limit: the tenant's, and the one across tenants). A job
--   without a key, or whose key has no limit, is taken. For a key with a
--   limit the claim first takes the key's lock (_key_lock_key) without
--   waiting; when another claim or a job's end holds it, the key's jobs are
--   left for a later claim. Then:
--   * a cap: at most one job of the key per claim (a claim's jobs run one
--     after the other, so a second would hold a slot idle), and only while
--     fewer than the cap are claimed (running);
--   * a rate: one token per job, the bucket refilled at per_second up to
--     burst since it was last read.
--   The key's other pending jobs of the tenant (up to 1,000, first in claim
--   order) are parked when the cap is reached (parked cap) or the tokens are
--   spent (parked rate, and wake_at is set to when the bucket is full again,
--   which the runners hear of: _notify_due):
--   out of the claim index, so that neither the claim's cost nor the other
--   jobs of the queue wait on them. A candidate locked by
--   someone else is neither taken nor parked. At most p_want of a key are
--   taken (and charged). p_keys (in and out) is what the claim did under the
--   limits so far, across its tenants (broker._claim_keys): it parks at most
--   1,000 jobs in all.
--   Returns the ids taken, in claim order.
--   Calls: _key_lock_key, _parked, _notify_due
--   Tables: reads broker_key_limit, broker_jobs; writes broker_key_limit (tokens), broker_jobs (parked)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._admit_keyed(
    p_tenant_id  text,
    p_candidates broker._claim_candidate[],
    INOUT p_keys broker._claim_keys,
    p_now        timestamptz,
    p_want       integer,
    OUT p_ids    bigint[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_key      text;
    v_cap      integer;     -- slots left under the caps (NULL: no cap)
    v_tokens   double precision;  -- whole tokens left under the rates (NULL: no rate)
    v_ok       boolean;
    v_take     integer;
    v_park     smallint;
    v_limit    record;
    v_running  integer;
    v_parked   integer;
    v_key_ids  bigint[];
    v_allowed  text[] := '{}';   -- keys whose candidates are taken without a limit
    v_quota    integer[] := '{}';
    v_keys     text[] := '{}';
    c          broker._claim_candidate;
    i          integer;
BEGIN
    p_ids := '{}';
    -- the limits of each key among the candidates, once per key
    FOR v_key IN SELECT DISTINCT x.concurrency_key FROM pg_catalog.unnest(p_candidates) AS x
                  WHERE x.concurrency_key IS NOT NULL LOOP
        v_cap := NULL;
        v_tokens := NULL;
        v_ok := true;
        v_park := NULL;
        FOR v_limit IN SELECT l.tenant_id, l.max_running, l.per_second, l.burst, l.tokens, l.tokens_at
                         FROM broker.broker_key_limit AS l
                        WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
                          AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                        ORDER BY l.tenant_id NULLS FIRST LOOP
            IF NOT pg_catalog.pg_try_advisory_xact_lock(broker._key_lock_key(v_limit.tenant_id, v_key)) THEN
                v_ok := false;   -- another claim, or a job's end, is at this key: a later claim takes it
                EXIT;
            END IF;
            IF v_limit.max_running IS NOT NULL THEN
                SELECT pg_catalog.count(*)::integer INTO v_running FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) v_key
                   AND (v_limit.tenant_id IS NULL OR j.tenant_id OPERATOR(pg_catalog.=) v_limit.tenant_id)
                   AND j.complete_status OPERATOR(pg_catalog.=) 1;
                -- (and the key's jobs this claim took already count: they are claimed at its end)
                v_cap := LEAST(COALESCE(v_cap, 2147483647), v_limit.max_running OPERATOR(pg_catalog.-) v_running
                               OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*)::integer FROM pg_catalog.unnest(p_keys.taken) AS t(k)
                                                        WHERE t.k OPERATOR(pg_catalog.=) v_key));
            END IF;
            IF v_limit.per_second IS NOT NULL THEN
                v_tokens := LEAST(COALESCE(v_tokens, 'Infinity'),
                                  pg_catalog.floor(LEAST(v_limit.burst::double precision,
                                      COALESCE(v_limit.tokens, v_limit.burst) OPERATOR(pg_catalog.+)
                                      (GREATEST(pg_catalog.date_part('epoch', p_now OPERATOR(pg_catalog.-) COALESCE(v_limit.tokens_at, p_now)), 0)
                                       OPERATOR(pg_catalog.*) v_limit.per_second))));
            END IF;
        END LOOP;
        IF NOT v_ok THEN
            v_take := 0;
        ELSIF v_cap IS NULL AND v_tokens IS NULL THEN
            v_allowed := v_allowed OPERATOR(pg_catalog.||) v_key;
            CONTINUE;
        ELSE
            v_take := LEAST(COALESCE(v_cap, 2147483647), COALESCE(v_tokens, 2147483647)::integer);
            IF v_cap IS NOT NULL THEN
                v_take := LEAST(v_take, CASE WHEN v_key OPERATOR(pg_catalog.=) ANY (p_keys.taken) THEN 0 ELSE 1 END);
            END IF;
            v_take := GREATEST(LEAST(v_take, p_want), 0);   -- (no more tokens spent than the claim wants)
            -- park the key's other candidates when the limit, not this claim, holds them back
            IF v_cap IS NOT NULL AND v_cap OPERATOR(pg_catalog.<=) v_take THEN
                v_park := broker._parked('cap');
            ELSIF v_tokens IS NOT NULL AND v_tokens OPERATOR(pg_catalog.<=) v_take THEN
                v_park := broker._parked('rate');
            END IF;
        END IF;
        IF v_ok AND v_tokens IS NOT NULL THEN
            -- the tokens this claim spends (a job it then finds locked by another claim spends one too)
            UPDATE broker.broker_key_limit AS l
               SET tokens = LEAST(l.burst::double precision, COALESCE(l.tokens, l.burst) OPERATOR(pg_catalog.+)
                                  (GREATEST(pg_catalog.date_part('epoch', p_now OPERATOR(pg_catalog.-) COALESCE(l.tokens_at, p_now)), 0)
                                   OPERATOR(pg_catalog.*) l.per_second)) OPERATOR(pg_catalog.-) v_take,
                   tokens_at = p_now
             WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
               AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
               AND l.per_second IS NOT NULL;
            IF v_park OPERATOR(pg_catalog.=) broker._parked('rate') THEN
                -- when the bucket is full again: the claim that comes then unparks a burst of them
                -- (broker._unpark_due), and the runner's poll comes then (broker_next_due)
                UPDATE broker.broker_key_limit AS l
                   SET wake_at = p_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(
                           secs => GREATEST(l.burst OPERATOR(pg_catalog.-) l.tokens, 0) OPERATOR(pg_catalog./) l.per_second)
                 WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
                   AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                   AND l.per_second IS NOT NULL
                   AND l.tokens OPERATOR(pg_catalog.<) 1;
                IF FOUND THEN
                    PERFORM broker._notify_due();   -- (a time the runner's poll did not know yet)
                END IF;
            END IF;
        END IF;
        v_key_ids := ARRAY(SELECT x.job_id FROM pg_catalog.unnest(p_candidates) WITH ORDINALITY AS x(job_id, concurrency_key, run_after, row_tid, o)
                            WHERE x.concurrency_key OPERATOR(pg_catalog.=) v_key ORDER BY x.o);
        IF v_park IS NOT NULL AND p_keys.parked OPERATOR(pg_catalog.<) 1000 THEN
            -- the key's other pending jobs of this tenant, not only this window's, in claim order, up
            -- to 1,000 a claim: the claims that follow then do not meet them level by level (rows
            -- another transaction holds are left as they are: SKIP LOCKED)
            UPDATE broker.broker_jobs AS j
               SET parked = v_park
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                       SELECT p.job_id FROM broker.broker_jobs AS p
                        WHERE p.concurrency_key OPERATOR(pg_catalog.=) v_key
                          AND p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                          AND p.complete_status OPERATOR(pg_catalog.=) 0
                          AND p.parked OPERATOR(pg_catalog.=) 0
                          AND p.job_id OPERATOR(pg_catalog.<>) ALL (v_key_ids[1 : v_take])
                        ORDER BY p.concurrency_key, p.tenant_id, p.job_priority DESC, p.run_after, p.job_id
                        LIMIT 1000 OPERATOR(pg_catalog.-) p_keys.parked
                          FOR NO KEY UPDATE SKIP LOCKED));
            GET DIAGNOSTICS v_parked = ROW_COUNT;
            p_keys.parked := p_keys.parked OPERATOR(pg_catalog.+) v_parked;
        END IF;
        IF v_cap IS NOT NULL AND v_take OPERATOR(pg_catalog.>) 0 THEN
            p_keys.taken := p_keys.taken OPERATOR(pg_catalog.||) v_key;
        END IF;
        v_keys := v_keys OPERATOR(pg_catalog.||) v_key;
        v_quota := v_quota OPERATOR(pg_catalog.||) v_take;
    END LOOP;

    -- the candidates taken, in claim order
    FOREACH c IN ARRAY p_candidates LOOP
        IF c.concurrency_key IS NULL OR c.concurrency_key OPERATOR(pg_catalog.=) ANY (v_allowed) THEN
            p_ids := p_ids OPERATOR(pg_catalog.||) c.job_id;
        ELSE
            i := pg_catalog.array_position(v_keys, c.concurrency_key);
            IF v_quota[i] OPERATOR(pg_catalog.>) 0 THEN
                p_ids := p_ids OPERATOR(pg_catalog.||) c.job_id;
                v_quota[i] := v_quota[i] OPERATOR(pg_catalog.-) 1;
            END IF;
        END IF;
    END LOOP;
    RETURN;
END;
$$;
COMMENT ON FUNCTION broker._admit_keyed(text, broker._claim_candidate[], broker._claim_keys, timestamptz, integer) IS
    'Internal: which candidates a claim may take under their keys'' limits; parks the key''s others when its cap or tokens hold them back.';
