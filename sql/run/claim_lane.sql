-- sql/run/claim_lane.sql: one tenant's part of a claim (broker._claim_lane).
-- ---------------------------------------------------------------------------
-- Function: broker._claim_lane(p_job_queue, p_tenant_id, p_want, p_now,
--     p_hxmin, p_hxmax, p_hxip, p_hint, p_keys)
--   For broker_get: locks up to p_want claimable jobs of tenant p_tenant_id
--   in queue p_job_queue, in the tenant's claim order (highest priority
--   first, then earliest run_after, then lowest job_id), and returns their
--   ids (p_ids). It also returns where the tenant's ready jobs start (p_first,
--   its first probe, job_id NULL when it has none), for the queue's hint;
--   p_want 0 only probes.
--   The claim index holds only pending, unblocked, unparked jobs, by queue
--   and tenant. The probe finds the tenant's first of them in claim order
--   (a level whose first job is for later, which only a row written without
--   the triggers can be, is skipped whole), and the claim reads that level
--   from there. With a hint (p_hxmin, p_hxmax, p_hxip: its snapshot; p_hint:
--   the tenant's position in it, job_id NULL when the snapshot saw none of
--   the tenant's) it starts there, and adds the jobs made ready since, found
--   by the transaction that made them ready (ready_xid); levels below the
--   position are read from their start (sql/tables/broker_claim_hint.sql).
--   It reads at most 16 levels a claim (a tenant whose levels give nothing
--   now costs a claim no more), each in windows of what is still wanted plus 16, without
--   locks, at most 4 windows a level: the jobs of a window under a limit on
--   their concurrency key go through broker._admit_keyed (which parks those
--   its limit holds back), then the rest are locked, skipping those another
--   transaction holds. So a claim steps over at most a few windows of rows
--   locked elsewhere, whoever holds them.
--   Each statement is an index descent with LIMIT or an index range, no
--   join, planned with enable_seqscan off and kept as a generic plan
--   (tests_sql/run/claim_is_index_backed.sql).
--   Calls: _claimable, _claimable_by_xid, _claimable_by_id, _admit_keyed
--   Tables: reads broker_jobs (and, through _admit_keyed, writes its parked and broker_key_limit)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim_lane(
    p_job_queue  integer,
    p_tenant_id  text,
    p_want       integer,
    p_now        timestamptz,
    p_hxmin      xid8,
    p_hxmax      xid8,
    p_hxip       xid8[],
    p_hint       broker._claim_position,
    INOUT p_keys broker._claim_keys,
    OUT p_ids    bigint[],
    OUT p_first  broker._claim_position)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_left     integer := p_want;
    v_bound    bigint := 2147483648;  -- above every integer priority
    v_priority integer;
    v_from_at  timestamptz;   -- the level's claimable jobs start after (v_from_at, v_from_id)
    v_from_id  bigint;
    v_src      text;          -- new: made ready since the hint; from: the hint's level; scan: below it
    v_hxmin    xid8 := p_hxmin;
    v_hxmax    xid8 := p_hxmax;
    v_hxip     xid8[] := p_hxip;
    v_hp       integer;
    v_hr       timestamptz;
    v_hid      bigint;
    v_cands    broker._claim_candidate[];
    v_tids     tid[];
    v_keyed    boolean;       -- a candidate has a concurrency key: its limits decide
    v_admit    record;
    v_got      bigint[];
    v_windows  integer;
    v_levels   integer := 0;   -- levels probed
    v_window   integer;       -- rows a window reads: what is still wanted, and 16 more
    v_last     broker._claim_candidate;
BEGIN
    p_ids := '{}';
    IF v_hxmin IS NOT NULL THEN
        -- (a tenant the hint's snapshot saw no ready job of: a position past every job)
        v_hp := COALESCE(p_hint.job_priority, -2147483648);
        v_hr := COALESCE(p_hint.run_after, 'infinity');
        v_hid := COALESCE(p_hint.job_id, 9223372036854775807);
    END IF;
    LOOP
        -- <priority-probe> The tenant's first pending, unblocked, unparked job below v_bound in
        -- claim order: the least of the first job made ready since the hint above where it
        -- starts (a range of broker_jobs_ready_xid_idx from the snapshot's xmin), the first of
        -- the hint's level from where it starts, and the first of the levels below it. Each an
        -- index descent with LIMIT 1 (no join: no statistics can make it a hash join over every
        -- ready job); without a hint, only the last one, over every level.
        SELECT c.p, c.r, c.id, c.src
          INTO v_priority, v_from_at, v_from_id, v_src
          FROM ((SELECT j.job_priority AS p, j.run_after AS r, j.job_id AS id, 'new' AS src
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
                    AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                    AND (j.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR j.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND j.job_priority OPERATOR(pg_catalog.<) v_bound
                    AND (j.job_priority OPERATOR(pg_catalog.>) v_hp
                         OR (j.job_priority OPERATOR(pg_catalog.=) v_hp
                             AND (j.run_after, j.job_id) OPERATOR(pg_catalog.<) (v_hr, v_hid)))
                  ORDER BY j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                (SELECT j.job_priority, j.run_after, j.job_id, 'from'
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                    AND j.job_priority OPERATOR(pg_catalog.=) v_hp AND v_hp OPERATOR(pg_catalog.<) v_bound
                    AND (j.run_after, j.job_id) OPERATOR(pg_catalog.>=) (v_hr, v_hid)
                  ORDER BY j.job_queue, j.tenant_id, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                (SELECT j.job_priority, j.run_after, j.job_id, 'scan'
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                    AND j.job_priority OPERATOR(pg_catalog.<) LEAST(v_bound, COALESCE(v_hp, v_bound))
                  ORDER BY j.job_queue, j.tenant_id, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                SELECT NULL, NULL, NULL, 'none') AS c   -- (a row even when there is no job)
         ORDER BY c.p DESC NULLS LAST, c.r, c.id
         LIMIT 1
        -- </priority-probe>
        ;
        IF v_bound OPERATOR(pg_catalog.=) 2147483648 THEN
            p_first := ROW(p_tenant_id, v_priority, v_from_at, v_from_id)::broker._claim_position;
        END IF;
        v_levels := v_levels OPERATOR(pg_catalog.+) 1;
        -- (at most 16 levels a claim: a tenant whose levels give nothing now, say each holds one
        -- job of a key this claim already took one of, costs a claim no more than that)
        EXIT WHEN v_priority IS NULL OR v_left OPERATOR(pg_catalog.<=) 0 OR v_levels OPERATOR(pg_catalog.>) 16;
        IF v_from_at OPERATOR(pg_catalog.>) p_now THEN
            -- the level's earliest job is for later, and so is all of it: the level below
            v_bound := v_priority;
            CONTINUE;
        END IF;

        -- the level in windows: the jobs made ready since the hint before where it starts (new),
        -- then, at the hint's level or below it, the level's jobs from where they start
        v_windows := 0;
        v_from_id := v_from_id OPERATOR(pg_catalog.-) 1;   -- (a range starts after (v_from_at, v_from_id))
        LOOP
            v_windows := v_windows OPERATOR(pg_catalog.+) 1;
            v_window := v_left OPERATOR(pg_catalog.+) 16;
            -- (the window, its tids and whether a key is among them in one statement; an aggregate
            -- over a subquery takes its rows in the order the subquery gives them)
            IF v_src OPERATOR(pg_catalog.=) 'new' THEN
                SELECT COALESCE(pg_catalog.array_agg(w.cand), '{}'), pg_catalog.array_agg(w.row_tid), pg_catalog.bool_or(w.keyed)
                  INTO v_cands, v_tids, v_keyed
                  FROM (
                    -- <claim-new> the level's jobs made ready since the hint, before where it starts
                    SELECT ROW(r.job_id, r.concurrency_key, r.run_after, r.ctid)::broker._claim_candidate AS cand,
                           r.ctid AS row_tid, r.concurrency_key IS NOT NULL AS keyed
                      FROM broker.broker_jobs AS r
                     WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                       AND broker._claimable_by_xid(r.complete_status, r.pending_deps, r.parked)
                       AND r.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                       AND (r.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR r.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
                       AND r.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                       AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                       AND (v_priority OPERATOR(pg_catalog.>) v_hp OR (r.run_after, r.job_id) OPERATOR(pg_catalog.<) (v_hr, v_hid))
                       AND r.run_after OPERATOR(pg_catalog.<=) p_now
                     ORDER BY r.run_after, r.job_id
                     LIMIT v_window
                    -- </claim-new>
                    ) AS w;
            ELSE
                SELECT COALESCE(pg_catalog.array_agg(w.cand), '{}'), pg_catalog.array_agg(w.row_tid), pg_catalog.bool_or(w.keyed)
                  INTO v_cands, v_tids, v_keyed
                  FROM (
                    -- <claim-range> a window of the level's jobs from where they start, not locked
                    SELECT ROW(r.job_id, r.concurrency_key, r.run_after, r.ctid)::broker._claim_candidate AS cand,
                           r.ctid AS row_tid, r.concurrency_key IS NOT NULL AS keyed
                      FROM broker.broker_jobs AS r
                     WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                       AND r.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                       AND broker._claimable(r.complete_status, r.pending_deps, r.parked)
                       AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                       AND (r.run_after, r.job_id) OPERATOR(pg_catalog.>) (v_from_at, v_from_id)
                       AND r.run_after OPERATOR(pg_catalog.<=) p_now
                     ORDER BY r.job_queue, r.tenant_id, r.job_priority DESC, r.run_after, r.job_id
                     LIMIT v_window
                    -- </claim-range>
                    ) AS w;
            END IF;
            IF pg_catalog.cardinality(v_cands) OPERATOR(pg_catalog.>) 0 THEN
                -- what the keys' limits let this claim take (jobs without a key pass as they are)
                IF v_keyed THEN
                    SELECT a.p_keys, a.p_ids INTO v_admit
                      FROM broker._admit_keyed(p_tenant_id, v_cands, p_keys, p_now, v_left) AS a;
                    p_keys := v_admit.p_keys;
                    v_tids := ARRAY(SELECT c.row_tid FROM pg_catalog.unnest(v_cands) AS c
                                     WHERE c.job_id OPERATOR(pg_catalog.=) ANY (v_admit.p_ids));
                END IF;
                v_got := ARRAY(
                    -- <claim-lock> those locked, skipping rows another transaction holds: the row
                    -- versions the window read, fetched by their tids (no index descent); one updated
                    -- since is not found, or, updated after this statement's snapshot, rechecked as
                    -- its latest version (the ids as an array, not a join: a join's generic plan can
                    -- be a hash join over the table)
                    SELECT r.job_id
                      FROM broker.broker_jobs AS r
                     WHERE r.ctid OPERATOR(pg_catalog.=) ANY (v_tids)
                       AND broker._claimable_by_id(r.complete_status, r.pending_deps, r.parked)
                     ORDER BY r.job_priority DESC, r.run_after, r.job_id
                     LIMIT v_left
                       FOR NO KEY UPDATE SKIP LOCKED
                    -- </claim-lock>
                    );
                p_ids := p_ids OPERATOR(pg_catalog.||) v_got;
                v_left := v_left OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_got);
            END IF;
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
            IF v_src OPERATOR(pg_catalog.=) 'new' THEN
                EXIT WHEN v_priority OPERATOR(pg_catalog.<>) v_hp;
                -- then the hint's level from where it starts
                v_src := 'from';
                v_from_at := v_hr;
                v_from_id := v_hid OPERATOR(pg_catalog.-) 1;
                CONTINUE;
            END IF;
            -- a window not full: the level has no more; at most 4 windows a level
            EXIT WHEN pg_catalog.cardinality(v_cands) OPERATOR(pg_catalog.<) v_window OR v_windows OPERATOR(pg_catalog.>=) 4;
            v_last := v_cands[pg_catalog.cardinality(v_cands)];
            v_from_at := v_last.run_after;
            v_from_id := v_last.job_id;
        END LOOP;
        EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
        -- This level is drained (or what is left of it is locked elsewhere or held back by
        -- its keys' limits): continue below it.
        v_bound := v_priority;
    END LOOP;
    IF p_first IS NULL THEN
        p_first := ROW(p_tenant_id, NULL, NULL, NULL)::broker._claim_position;
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._claim_lane(integer, text, integer, timestamptz, xid8, xid8, xid8[], broker._claim_position, broker._claim_keys) IS
    'Internal: one tenant''s part of a claim: locks up to p_want of its claimable jobs of a queue in claim order; returns them and where its ready jobs start.';
