-- sql/run/claim.sql: claiming jobs (broker_get).
-- ---------------------------------------------------------------------------
-- Function: broker._claim_job_token(p_claim_token, p_job_id)
--   The lease token of job p_job_id in a claim whose claimer chose the token
--   p_claim_token (broker_get p_lease_token): an md5 of both, so that it is
--   unique per job and tells nothing of the claim's token.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim_job_token(p_claim_token uuid, p_job_id bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- (no SET clause, so that it is inlined into the claim's UPDATE, which computes it for each job it
-- claims; everything in it is qualified: sql/pgspot-no-search-path.txt)
AS $$
    SELECT pg_catalog.md5(p_claim_token::pg_catalog.text OPERATOR(pg_catalog.||) ':'
                          OPERATOR(pg_catalog.||) p_job_id::pg_catalog.text)::pg_catalog.uuid
$$;
COMMENT ON FUNCTION broker._claim_job_token(uuid, bigint) IS
    'Internal: a job''s lease token in a claim whose claimer chose its token (an md5 of the claim token and the job id).';

-- ---------------------------------------------------------------------------
-- Function: broker._claim(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_lease_token, p_tenant_id)
--   The claim of broker_get (below, where the claim is told) and of
--   broker_claim_tasks (sql/tasks/claim.sql), with arguments its callers
--   checked. A claim for one tenant (p_tenant_id) serves that tenant alone
--   and writes no hint. Each row also carries the job's execute_str (a task's
--   arguments) and traceparent, which broker_claim_tasks returns without
--   reading the rows again, and its enqueued_by and run_as, with which it
--   checks that the enqueuer may still have the task run.
--   Calls: _paused_tenants, _paused_for, _unpark_due, _claimable, _claimable_by_xid, _claim_lane, _state, _save_claim_hint, _claim_job_token
--   Tables: reads broker_claim_hint, broker_tenant_weight; writes broker_jobs (and broker_claim_hint, through _save_claim_hint)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim(
    p_job_queue     integer,
    p_instance_id   bigint,
    p_lease_seconds integer,
    p_batch_size    integer,
    p_lease_token   uuid,
    p_tenant_id     text)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean,
    execute_str      text,
    traceparent      text,
    enqueued_by      name,
    run_as           name)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_lease    integer := p_lease_seconds;
    v_left     integer := p_batch_size;
    v_now      timestamptz := pg_catalog.statement_timestamp();
    v_paused   text[] := broker._paused_tenants(p_job_queue);  -- NULL: nothing paused in this queue
    -- the hint: every ready job of a tenant its snapshot saw is at or after the tenant's position
    v_hxmin    xid8;          -- its snapshot: ready_xid >= v_hxmax or in v_hxip (all >= v_hxmin):
    v_hxmax    xid8;          -- made ready since
    v_hxip     xid8[];
    v_hint     broker._claim_position[];
    v_snap     pg_snapshot := CASE WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL
                                   THEN pg_catalog.pg_current_snapshot() END;  -- for a new hint
    v_tenants  text[];
    v_weights  integer[];
    v_done     boolean[];     -- a tenant that gave fewer than its share has no more now
    v_first    broker._claim_position[] := '{}';
    v_keys     broker._claim_keys := ROW('{}', 0);   -- what it did under the keys' limits
    v_round_ids bigint[];
    v_got      bigint[];
    v_share    integer[];
    v_wsum     bigint;
    v_point    bigint;
    v_turn     bigint;
    v_step     double precision;
    v_extra    integer;
    v_acc      bigint;
    v_round    integer := 0;
    v_lane     record;
    v_pos      broker._claim_position;   -- a tenant's position in the hint
    i          integer;
    k          integer;
BEGIN
    IF v_paused IS NOT NULL AND pg_catalog.array_position(v_paused, NULL) IS NOT NULL THEN
        RETURN;  -- paused for every tenant (broker_pause_queue)
    END IF;

    SELECT pg_catalog.pg_snapshot_xmin(h.snapshot), pg_catalog.pg_snapshot_xmax(h.snapshot),
           ARRAY(SELECT pg_catalog.pg_snapshot_xip(h.snapshot)), h.positions
      INTO v_hxmin, v_hxmax, v_hxip, v_hint
      FROM broker.broker_claim_hint AS h
     WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue
       AND h.started_at OPERATOR(pg_catalog.=) pg_catalog.pg_postmaster_start_time()
       AND pg_catalog.pg_snapshot_xmax(h.snapshot)
           OPERATOR(pg_catalog.<=) pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot());
    -- (two IFs: without a hint, the count is not even started)
    IF v_hxmin IS NOT NULL THEN
        IF (SELECT pg_catalog.count(*) FROM (SELECT FROM broker.broker_jobs AS j
             WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
               AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
               AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
             LIMIT 100) AS x) OPERATOR(pg_catalog.>=) 100 THEN
            -- 100 or more made ready since the hint (a bulk enqueue): reading them all at every
            -- claim would cost more than the hint saves; this claim reads from the start of the
            -- index and writes a new hint
            v_hxmin := NULL;
            v_hxmax := NULL;
            v_hint := NULL;
        END IF;
    END IF;

    -- jobs parked until now, or until a token of their key now due, are claimable again (after
    -- the snapshot above: they are made ready by this transaction, which it does not see)
    IF EXISTS (SELECT FROM broker.broker_jobs AS j
                WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                  AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                  AND j.run_after OPERATOR(pg_catalog.<=) v_now)
       OR EXISTS (SELECT FROM broker.broker_key_limit AS l WHERE l.wake_at OPERATOR(pg_catalog.<=) v_now) THEN
        PERFORM broker._unpark_due(p_job_queue);
    END IF;

    IF v_hxmin IS NOT NULL THEN
        -- the hint's tenants, and those of the jobs made ready since (fewer than 100: above)
        v_tenants := ARRAY(
            SELECT DISTINCT t.tenant_id FROM (
                SELECT x.tenant_id FROM pg_catalog.unnest(v_hint) AS x WHERE x.job_id IS NOT NULL
                UNION ALL
                SELECT j.tenant_id FROM broker.broker_jobs AS j
                 WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                   AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
                   AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                   AND (j.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR j.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))) AS t
             ORDER BY 1);
    ELSIF p_tenant_id IS NOT NULL THEN
        v_tenants := ARRAY[p_tenant_id];
    ELSE
        -- the tenants of the claim index in this queue: one descent each
        v_tenants := ARRAY(
            -- <claim-tenants>
            WITH RECURSIVE t (tenant) AS (
                (SELECT j.tenant_id FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                  ORDER BY j.job_queue, j.tenant_id LIMIT 1)
                UNION ALL
                SELECT (SELECT j.tenant_id FROM broker.broker_jobs AS j
                         WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                           AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                           AND j.tenant_id OPERATOR(pg_catalog.>) t.tenant
                         ORDER BY j.job_queue, j.tenant_id LIMIT 1)
                  FROM t WHERE t.tenant IS NOT NULL)
            SELECT t.tenant FROM t WHERE t.tenant IS NOT NULL
            -- </claim-tenants>
            );
    END IF;
    IF p_tenant_id IS NOT NULL AND v_hxmin IS NOT NULL THEN
        -- a claim for one tenant (broker_claim_tasks) serves that tenant alone
        v_tenants := ARRAY(SELECT t FROM pg_catalog.unnest(v_tenants) AS t WHERE t OPERATOR(pg_catalog.=) p_tenant_id);
    END IF;
    k := COALESCE(pg_catalog.cardinality(v_tenants), 0);
    IF k OPERATOR(pg_catalog.=) 0 THEN
        v_first := '{}';
    ELSE
        IF k OPERATOR(pg_catalog.=) 1 THEN
            -- one tenant: the whole claim is its (no weight, no point to share from)
            v_weights := ARRAY[1];
            v_done := ARRAY[broker._paused_for(v_paused, v_tenants[1])];
            v_point := 0;
        ELSE
            v_weights := ARRAY(SELECT COALESCE(w.weight, 1) FROM pg_catalog.unnest(v_tenants) WITH ORDINALITY AS t(tenant, o)
                                 LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) t.tenant
                                ORDER BY t.o);
            -- paused tenants take no share (their lanes are only probed, for the hint)
            v_done := ARRAY(SELECT broker._paused_for(v_paused, t.tenant)
                              FROM pg_catalog.unnest(v_tenants) WITH ORDINALITY AS t(tenant, o) ORDER BY t.o);
            -- where the remainder of each round's shares starts: moves from claim to claim
            -- (and from claim to claim of one transaction: its turn)
            v_turn := COALESCE(NULLIF(pg_catalog.current_setting('broker.claim_turn', true), '')::bigint, 0) OPERATOR(pg_catalog.+) 1;
            PERFORM pg_catalog.set_config('broker.claim_turn', v_turn::text, true);
            v_point := ((pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint OPERATOR(pg_catalog.+) v_turn)
                        OPERATOR(pg_catalog.*) 2654435761) OPERATOR(pg_catalog.%) 4294967296;
        END IF;
        LOOP
            v_round := v_round OPERATOR(pg_catalog.+) 1;
            -- this round's shares: floor(left * weight / sum of weights), the remainder by weight
            -- at evenly spaced points from v_point (systematic sampling)
            v_wsum := 0;
            FOR i IN 1 .. k LOOP
                IF NOT v_done[i] THEN v_wsum := v_wsum OPERATOR(pg_catalog.+) v_weights[i]; END IF;
            END LOOP;
            v_share := pg_catalog.array_fill(0, ARRAY[k]);
            v_round_ids := '{}';
            IF v_wsum OPERATOR(pg_catalog.>) 0 THEN
                v_extra := v_left;
                FOR i IN 1 .. k LOOP
                    IF NOT v_done[i] THEN
                        v_share[i] := (v_left::bigint OPERATOR(pg_catalog.*) v_weights[i] OPERATOR(pg_catalog./) v_wsum)::integer;
                        v_extra := v_extra OPERATOR(pg_catalog.-) v_share[i];
                    END IF;
                END LOOP;
                v_step := v_wsum::double precision OPERATOR(pg_catalog./) GREATEST(v_extra, 1);
                FOR e IN 0 .. v_extra OPERATOR(pg_catalog.-) 1 LOOP
                    v_acc := ((v_point OPERATOR(pg_catalog.%) v_wsum)
                              OPERATOR(pg_catalog.+) pg_catalog.floor(e OPERATOR(pg_catalog.*) v_step)::bigint)
                             OPERATOR(pg_catalog.%) v_wsum;
                    FOR i IN 1 .. k LOOP
                        CONTINUE WHEN v_done[i];
                        IF v_acc OPERATOR(pg_catalog.<) v_weights[i] THEN
                            v_share[i] := v_share[i] OPERATOR(pg_catalog.+) 1;
                            EXIT;
                        END IF;
                        v_acc := v_acc OPERATOR(pg_catalog.-) v_weights[i];
                    END LOOP;
                END LOOP;
            END IF;
            FOR i IN 1 .. k LOOP
                -- the first round probes every tenant (the hint needs each one's position)
                CONTINUE WHEN v_round OPERATOR(pg_catalog.>) 1 AND (v_done[i] OR v_share[i] OPERATOR(pg_catalog.=) 0);
                v_pos := NULL;
                IF v_hint IS NOT NULL THEN
                    v_pos := (SELECT x FROM pg_catalog.unnest(v_hint) AS x WHERE x.tenant_id OPERATOR(pg_catalog.=) v_tenants[i]);
                END IF;
                -- (a call, not a query over the function: no executor to start for it)
                v_lane := broker._claim_lane(p_job_queue, v_tenants[i], CASE WHEN v_done[i] THEN 0 ELSE v_share[i] END,
                                             v_now, v_hxmin, v_hxmax, v_hxip, v_pos, v_keys);
                v_keys := v_lane.p_keys;
                IF v_round OPERATOR(pg_catalog.=) 1 THEN
                    v_first := v_first OPERATOR(pg_catalog.||) v_lane.p_first;
                END IF;
                CONTINUE WHEN v_done[i];
                v_got := v_lane.p_ids;
                v_round_ids := v_round_ids OPERATOR(pg_catalog.||) v_got;
                v_left := v_left OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_got);
                IF pg_catalog.cardinality(v_got) OPERATOR(pg_catalog.<) v_share[i] THEN
                    v_done[i] := true;   -- no more of this tenant's jobs can be had now
                END IF;
            END LOOP;
            -- this round's jobs are claimed now: the next round's reads no longer see them as claimable
            IF pg_catalog.cardinality(v_round_ids) OPERATOR(pg_catalog.>) 0 THEN
                RETURN QUERY
                -- <claim-query> (tests_sql/run/claim_is_index_backed.sql EXPLAINs the text between these markers)
                -- (the ids as an array, not a join: a join's generic plan can be a hash join over the table)
                WITH claimed AS (
                    UPDATE broker.broker_jobs AS j
                       SET complete_status = broker._state('running'),
                           attempts = j.attempts OPERATOR(pg_catalog.+) 1,
                           started_at = v_now,
                           lease_token = CASE WHEN p_lease_token IS NULL THEN pg_catalog.gen_random_uuid()
                                              ELSE broker._claim_job_token(p_lease_token, j.job_id) END,
                           lease_instance_id = p_instance_id,
                           lease_expires_at = v_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
                     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_round_ids)
                    RETURNING j.job_id, j.job_name, j.job_queue, j.job_priority, j.job_language, j.tenant_id,
                              j.attempts, j.max_attempts, j.job_timeout, j.lease_token, j.lease_expires_at, j.run_after, j.autonomous,
                              j.execute_str, j.traceparent, j.enqueued_by, j.run_as
                )
                SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
                       c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous,
                       c.execute_str, c.traceparent, c.enqueued_by, c.run_as
                  FROM claimed AS c
                 -- (tenant by tenant, each in its claim order: the order the lanes took them in)
                 ORDER BY pg_catalog.array_position(v_tenants, c.tenant_id), c.job_priority DESC, c.run_after, c.job_id
                -- </claim-query>
                ;
            END IF;
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0 OR NOT (false OPERATOR(pg_catalog.=) ANY (v_done)) OR v_round OPERATOR(pg_catalog.>=) 8;
        END LOOP;
    END IF;


    -- a new hint once the one used is 100 transactions old (or there was none, or too many
    -- jobs were made ready since), from the snapshot taken before this transaction had an id
    -- of its own (its later writes then have ids the snapshot does not see, so they count as
    -- made ready since) and each tenant's first probe, all made after that snapshot
    -- (not by a claim for one tenant: its hint would lack the other tenants' positions)
    IF v_snap IS NOT NULL AND p_tenant_id IS NULL
       AND (v_hxmax IS NULL OR pg_catalog.pg_snapshot_xmax(v_snap)::text::bigint
                               OPERATOR(pg_catalog.-) v_hxmax::text::bigint OPERATOR(pg_catalog.>) 100) THEN
        PERFORM broker._save_claim_hint(p_job_queue, v_snap,
                                        ARRAY(SELECT x FROM pg_catalog.unnest(v_first) AS x WHERE x.job_id IS NOT NULL));
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._claim(integer, bigint, integer, integer, uuid, text) IS
    'Internal: the claim of broker_get and broker_claim_tasks (fair share, lanes, the hint), for a queue, a lease (seconds, checked by the caller), a batch size, a claim token and optionally one tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_lease_token)
--   Claims up to p_batch_size ready jobs of queue p_job_queue: pending, no
--   unfinished dependency (pending_deps = 0), run_after reached, not held
--   back by a limit on their concurrency key. Each claimed job becomes
--   running (1) with a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60) and one more attempt. Rows locked by another
--   transaction are skipped. Each job's lease token is random, or, when the
--   claimer gives the claim a token of its own (p_lease_token, as hard to
--   guess as a random uuid), derived from it and the job id
--   (_claim_job_token): a claimer that may lose the claim's answer (its
--   connection dies while the claim commits) can then hand back the claim it
--   never saw (broker_release_claim), while no job's token tells the claim's
--   token or another job's (a claim holds several tenants' jobs). Returns
--   one row per claimed job, none when idle; an autonomous job (autonomous =
--   true) is run with broker_autonomous_begin/_end outside a transaction,
--   not broker_run. It does no other work (deferred dependency releases are
--   the runner's maintenance, broker_apply_deferred_releases): a claim's
--   cost is its own queue's, whatever any tenant left to release.
--
--   Fair share: the claim serves the tenants that have claimable jobs in the
--   queue in proportion to their weights (broker_tenant_weight, default 1):
--   each gets the share of the batch its weight gives (floor), and the
--   remainder goes by weight from a point that moves from claim to claim
--   (the snapshot's xmax), so that over claims every tenant gets its share
--   even of batches of one. A tenant with fewer jobs than its share leaves
--   the rest to the others. Priority orders a tenant's own jobs (then age);
--   it never puts one tenant ahead of another's share. With one tenant the
--   order is priority, then age. Jobs are returned tenant by tenant, each in
--   its claim order.
--   A paused queue (broker_pause_queue) claims nothing; a tenant's pause
--   leaves that tenant out (broker._paused_tenants, one lookup per claim).
--   Parked jobs are out of the claim index: jobs dated later (until due;
--   broker._unpark_due, run first, puts back those that are), and jobs over
--   a limit on their key (until a slot frees or a token is due). So a claim
--   costs the same however many jobs of any tenant are dated later, paused,
--   over a limit or waiting on dependencies, and jobs locked elsewhere cost
--   it at most a few windows (broker._claim_lane).
--   Each tenant's part is broker._claim_lane. Under a snapshot held
--   elsewhere (a long REPEATABLE READ transaction, pg_dump, a replication
--   slot, hot_standby_feedback) the index entries of claimed jobs cannot be
--   removed and sit before the ready ones; so a claim starts each tenant at
--   its position in the queue's hint (broker_claim_hint) and adds the jobs
--   made ready since. The tenants are those of the hint and those of the
--   jobs made ready since it; without a usable hint, those of the claim
--   index (one descent per tenant). A claim that has no transaction id yet
--   when it starts writes a new hint, from its snapshot then and each
--   tenant's first probe, once the hint is 100 transactions old, or 100 jobs
--   or more were made ready since, so that a hint spans few claimed jobs and
--   few new ones.
--   A claim names the active instance (broker_register_instance) when there
--   is one, and its lease is at most an hour: whoever claims jobs it will
--   not run (a stray or hostile session of the runner's login) holds them
--   visibly and for a bounded time.
-- Errors: 22023 queue < 1, lease < 1 second or > 3600 seconds, batch size
--   < 1; 55000 p_instance_id is not the active instance, or NULL while one
--   is active.
-- Example:
--   SELECT job_id, lease_token FROM broker.broker_get(1, p_instance_id => 7, p_lease_seconds => 60, p_batch_size => 10);
--   broker_get checks its arguments and the instance; broker._claim, which
--   broker_claim_tasks shares (sql/tasks/claim.sql), does the rest. A claim
--   for one tenant (p_tenant_id) serves that tenant alone and writes no hint.
--   Calls: _setting_int, _check_lease_seconds, _active_instance, _claim (_paused_tenants, _paused_for, _unpark_due, _claimable, _claimable_by_xid, _claim_lane, _state, _save_claim_hint, _claim_job_token)
--   Tables: reads broker_claim_hint, broker_tenant_weight; writes broker_jobs (and broker_claim_hint, through _save_claim_hint)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_get(
    p_job_queue     integer DEFAULT 1,
    p_instance_id   bigint  DEFAULT NULL,
    p_lease_seconds integer DEFAULT NULL,
    p_batch_size    integer DEFAULT 1,
    p_lease_token   uuid    DEFAULT NULL)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
BEGIN
    IF p_job_queue IS NULL OR p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_job_queue must be >= 1, got %', COALESCE(p_job_queue::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_lease_seconds('broker_get', v_lease,
        'A lease only bounds how long a crashed claimer holds its jobs; a job that runs longer keeps it.');
    IF p_instance_id IS DISTINCT FROM broker._active_instance() THEN
        RAISE EXCEPTION 'broker_get: %', CASE WHEN p_instance_id IS NULL
                THEN 'claims name the active instance ' OPERATOR(pg_catalog.||) broker._active_instance()
                ELSE pg_catalog.format('instance %s is not the active instance', p_instance_id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim as the runner does: with the id broker_register_instance returned.';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_batch_size must be >= 1, got %', COALESCE(p_batch_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
           c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous
      FROM broker._claim(p_job_queue, p_instance_id, v_lease, p_batch_size, p_lease_token, NULL) AS c;
END;
$$;
COMMENT ON FUNCTION broker.broker_get(integer, bigint, integer, integer, uuid) IS
    'Claims up to p_batch_size ready jobs of a queue, tenants served in proportion to their weights, each tenant''s by priority then age, with a lease; returns them with their lease_token (derived from p_lease_token, the claim''s token, when given). Skips blocked, parked and locked jobs.';
