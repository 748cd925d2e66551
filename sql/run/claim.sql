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
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.md5(p_claim_token::pg_catalog.text OPERATOR(pg_catalog.||) ':'
                          OPERATOR(pg_catalog.||) p_job_id::pg_catalog.text)::pg_catalog.uuid
$$;
COMMENT ON FUNCTION broker._claim_job_token(uuid, bigint) IS
    'Internal: a job''s lease token in a claim whose claimer chose its token (an md5 of the claim token and the job id).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_lease_token)
--   Claims up to p_batch_size ready jobs of queue p_job_queue: pending, no
--   unfinished dependency (pending_deps = 0), run_after reached. Highest
--   priority first, then earliest run_after, then lowest job_id. Each claimed
--   job becomes running (1) with a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60) and one more attempt. Rows locked by another
--   claimer are skipped. Each job's lease token is random, or, when the
--   claimer gives the claim a token of its own (p_lease_token, as hard to
--   guess as a random uuid), derived from it and the job id
--   (_claim_job_token): a claimer that may lose the claim's answer (its
--   connection dies while the claim commits) can then hand back the claim it
--   never saw (broker_release_claim), while no job's token tells the claim's
--   token or another job's (a claim holds several tenants' jobs). Returns one row per claimed job, none when idle;
--   an autonomous job (autonomous = true) is run with
--   broker_autonomous_begin/_end outside a transaction, not broker_run.
--   It does no other work (deferred dependency releases are the runner's
--   maintenance, broker_apply_deferred_releases): a claim's cost is its own
--   queue's, whatever any tenant left to release.
--
--   The claim index holds only pending, unblocked jobs. The probe finds the
--   first of them in claim order (a level whose first job is for later is
--   skipped whole, one level at a time), and the claim's range scan starts
--   at the job it found, so the cost does not depend on how many jobs are
--   finished, blocked or scheduled for later.
--   Under a snapshot held elsewhere (a long REPEATABLE READ transaction,
--   pg_dump, a replication slot, hot_standby_feedback) the index entries of
--   claimed jobs cannot be removed and sit before the ready ones; a claim
--   that started at the start of the index would step over all of them. So
--   a claim starts at the queue's hint (broker_claim_hint: where the ready
--   jobs started as of a snapshot; every ready job that snapshot saw is at
--   or after it) and adds the jobs made ready since, which it finds by the
--   transaction that made them ready (ready_xid, broker_jobs_ready_xid_idx:
--   not seen by the hint's snapshot). Levels below the hint's are read from
--   their start. A claim that has no transaction id yet when it probes
--   writes a new hint (sql/run/claim_hint.sql) once the hint is 100
--   transactions old, or 100 jobs or more were made ready since (the
--   probe's snapshot and what it found), so that a hint spans few claimed
--   jobs and few new ones.
--   Each statement is an index descent with LIMIT or an index range, no
--   join, so missing or stale statistics cannot turn one into a scan of
--   every ready job, and the plans are made with enable_seqscan off: a
--   session keeps the generic plans (plan_cache_mode) it made at its first
--   claim, and made on a small table they were sequential scans
--   (tests_sql/run/claim_is_index_backed.sql,
--   tests_sql/run/claim_plans_do_not_depend_on_statistics.sql). Generic
--   plans: a custom plan would be planned again at every call, at about the
--   cost of a claim of one job.
--   A claim names the active instance (broker_register_instance) when there
--   is one, and its lease is at most an hour: whoever claims jobs it will
--   not run (a stray or hostile session of the runner's login) holds them
--   visibly and for a bounded time.
--   A paused queue (broker_pause_queue) claims nothing; a tenant's pause
--   skips that tenant's jobs (broker._paused_tenants, one lookup per claim):
--   a filter of the claim's own scan, which reads the rows it locks anyway,
--   not of the level probe (an index-only check); a level whose ready jobs
--   are all paused claims nothing and the claim goes on below it.
-- Errors: 22023 queue < 1, lease < 1 second or > 3600 seconds, batch size
--   < 1; 55000 p_instance_id is not the active instance, or NULL while one
--   is active.
-- Example:
--   SELECT job_id, lease_token FROM broker.broker_get(1, p_instance_id => 7, p_lease_seconds => 60, p_batch_size => 10);
--   Calls: _setting_int, _active_instance, _paused_tenants, _claimable, _claimable_by_xid, _state, _save_claim_hint, _claim_job_token
--   Tables: reads broker_claim_hint; writes broker_jobs (and broker_claim_hint, through _save_claim_hint)
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
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_lease    integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
    v_left     integer := p_batch_size;
    v_priority integer;
    v_bound    bigint := 2147483648;  -- above every integer priority
    v_now      timestamptz := pg_catalog.statement_timestamp();
    v_claimed  integer;
    v_paused   text[] := broker._paused_tenants(p_job_queue);  -- NULL: nothing paused in this queue
    v_from_at  timestamptz;   -- where the level's claimable jobs start
    v_from_id  bigint;
    v_src      text;          -- new: made ready since the hint; from: the hint's level; scan: below it
    v_ids      bigint[];
    -- the hint: every ready job its snapshot saw is at or after (v_hp, v_hr, v_hid) in claim order
    v_hxmin    xid8;          -- its snapshot: ready_xid >= v_hxmax or in v_hxip (all >= v_hxmin):
    v_hxmax    xid8;          -- made ready since
    v_hxip     xid8[];
    v_hp       integer;
    v_hr       timestamptz;
    v_hid      bigint;
    v_psnap    pg_snapshot;   -- a probe's snapshot, when the claim had no xid yet
    v_snap     pg_snapshot;   -- the first probe's, and what it found
    v_fp       integer;
    v_fr       timestamptz;
    v_fid      bigint;
BEGIN
    IF p_job_queue IS NULL OR p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_job_queue must be >= 1, got %', COALESCE(p_job_queue::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_lease OPERATOR(pg_catalog.<) 1 OR v_lease OPERATOR(pg_catalog.>) 3600 THEN
        RAISE EXCEPTION 'broker_get: the lease must be 1 to 3600 seconds, got %', v_lease
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A lease only bounds how long a crashed claimer holds its jobs; a job that runs longer keeps it.';
    END IF;
    IF p_instance_id IS DISTINCT FROM broker._active_instance() THEN
        RAISE EXCEPTION 'broker_get: %', CASE WHEN p_instance_id IS NULL
                THEN 'claims name the active instance ' OPERATOR(pg_catalog.||) broker._active_instance()
                ELSE pg_catalog.format('instance %s is not the active instance', p_instance_id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim as the runner does: with the id broker_register_instance returned.';
    END IF;
    IF v_left IS NULL OR v_left OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_batch_size must be >= 1, got %', COALESCE(p_batch_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF v_paused IS NOT NULL AND pg_catalog.array_position(v_paused, NULL) IS NOT NULL THEN
        RETURN;  -- paused for every tenant (broker_pause_queue)
    END IF;

    SELECT pg_catalog.pg_snapshot_xmin(h.snapshot), pg_catalog.pg_snapshot_xmax(h.snapshot),
           ARRAY(SELECT pg_catalog.pg_snapshot_xip(h.snapshot)), h.job_priority, h.run_after, h.job_id
      INTO v_hxmin, v_hxmax, v_hxip, v_hp, v_hr, v_hid
      FROM broker.broker_claim_hint AS h
     WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue
       AND h.started_at OPERATOR(pg_catalog.=) pg_catalog.pg_postmaster_start_time()
       AND pg_catalog.pg_snapshot_xmax(h.snapshot)
           OPERATOR(pg_catalog.<=) pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot());
    IF v_hp IS NOT NULL
       AND (SELECT pg_catalog.count(*) FROM (SELECT FROM broker.broker_jobs AS j
             WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
               AND broker._claimable_by_xid(j.complete_status, j.pending_deps)
               AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
             LIMIT 100) AS x) OPERATOR(pg_catalog.>=) 100 THEN
        -- 100 or more made ready since the hint (a bulk enqueue): reading them all at every
        -- claim would cost more than the hint saves; this claim reads from the start of the
        -- index and writes a new hint
        v_hxmin := NULL;
        v_hxmax := NULL;
        v_hp := NULL;
    END IF;

    LOOP
        -- <priority-probe> The first pending, unblocked job below v_bound in claim order: the
        -- least of the first job made ready since the hint above where it starts (a range of
        -- broker_jobs_ready_xid_idx from the snapshot's xmin), the first of the hint's level
        -- from where it starts, and the first of the levels below it. Each an index descent
        -- with LIMIT 1 (no join: no statistics can make it a hash join over every ready job);
        -- without a hint, only the last one, over every level. Paused tenants are the claim's
        -- filter, not the probe's: the hint is where the ready jobs start, paused or not.
        SELECT c.p, c.r, c.id, c.src,
               CASE WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL THEN pg_catalog.pg_current_snapshot() END
          INTO v_priority, v_from_at, v_from_id, v_src, v_psnap
          FROM ((SELECT j.job_priority AS p, j.run_after AS r, j.job_id AS id, 'new' AS src
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable_by_xid(j.complete_status, j.pending_deps)
                    AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                    AND (j.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR j.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
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
                    AND broker._claimable(j.complete_status, j.pending_deps)
                    AND j.job_priority OPERATOR(pg_catalog.=) v_hp AND v_hp OPERATOR(pg_catalog.<) v_bound
                    AND (j.run_after, j.job_id) OPERATOR(pg_catalog.>=) (v_hr, v_hid)
                  ORDER BY j.job_queue, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                (SELECT j.job_priority, j.run_after, j.job_id, 'scan'
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable(j.complete_status, j.pending_deps)
                    AND j.job_priority OPERATOR(pg_catalog.<) LEAST(v_bound, COALESCE(v_hp, v_bound))
                  ORDER BY j.job_queue, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                SELECT NULL, NULL, NULL, 'none') AS c   -- (a row even when there is no job)
         ORDER BY c.p DESC NULLS LAST, c.r, c.id
         LIMIT 1
        -- </priority-probe>
        ;
        IF v_bound OPERATOR(pg_catalog.=) 2147483648 THEN
            v_snap := v_psnap;
            v_fp := v_priority;
            v_fr := v_from_at;
            v_fid := v_from_id;
        END IF;
        EXIT WHEN v_priority IS NULL;
        IF v_from_at OPERATOR(pg_catalog.>) v_now THEN
            -- the level's earliest job is for later, and so is all of it: the level below
            v_bound := v_priority;
            CONTINUE;
        END IF;

        v_ids := '{}';
        IF v_src OPERATOR(pg_catalog.=) 'new' THEN
            v_ids := ARRAY(
                -- <claim-new> the level's jobs made ready since the hint, before where it starts
                SELECT r.job_id
                  FROM broker.broker_jobs AS r
                 WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                   AND broker._claimable_by_xid(r.complete_status, r.pending_deps)
                   AND r.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                   AND (r.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR r.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
                   AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                   AND (v_priority OPERATOR(pg_catalog.>) v_hp OR (r.run_after, r.job_id) OPERATOR(pg_catalog.<) (v_hr, v_hid))
                   AND r.run_after OPERATOR(pg_catalog.<=) v_now
                   AND (v_paused IS NULL OR r.tenant_id OPERATOR(pg_catalog.<>) ALL (v_paused))  -- paused tenants
                 ORDER BY r.run_after, r.job_id
                 LIMIT v_left
                   FOR NO KEY UPDATE SKIP LOCKED
                -- </claim-new>
                );
            IF v_priority OPERATOR(pg_catalog.=) v_hp THEN
                -- then the hint's level from where it starts
                v_src := 'from';
                v_from_at := v_hr;
                v_from_id := v_hid;
            END IF;
        END IF;
        IF v_src OPERATOR(pg_catalog.<>) 'new' AND pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.<) v_left THEN
            v_ids := v_ids OPERATOR(pg_catalog.||) ARRAY(
                -- <claim-range> the level's jobs from where they start
                SELECT r.job_id
                  FROM broker.broker_jobs AS r
                 WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                   AND broker._claimable(r.complete_status, r.pending_deps)
                   AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                   AND (r.run_after, r.job_id) OPERATOR(pg_catalog.>=) (v_from_at, v_from_id)
                   AND r.run_after OPERATOR(pg_catalog.<=) v_now
                   AND (v_paused IS NULL OR r.tenant_id OPERATOR(pg_catalog.<>) ALL (v_paused))  -- paused tenants
                 ORDER BY r.job_queue, r.job_priority DESC, r.run_after, r.job_id
                 LIMIT v_left OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_ids)
                   FOR NO KEY UPDATE SKIP LOCKED
                -- </claim-range>
                );
        END IF;

        IF pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.>) 0 THEN
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
                 WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids)
                RETURNING j.job_id, j.job_name, j.job_queue, j.job_priority, j.job_language, j.tenant_id,
                          j.attempts, j.max_attempts, j.job_timeout, j.lease_token, j.lease_expires_at, j.run_after, j.autonomous
            )
            SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
                   c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous
              FROM claimed AS c
             ORDER BY c.run_after, c.job_id
            -- </claim-query>
            ;
            GET DIAGNOSTICS v_claimed = ROW_COUNT;
            v_left := v_left OPERATOR(pg_catalog.-) v_claimed;
            EXIT WHEN v_left OPERATOR(pg_catalog.=) 0;
        END IF;
        -- This level is drained (or its remaining rows are locked by other
        -- claimers, or belong to paused tenants): continue below it.
        v_bound := v_priority;
    END LOOP;

    -- a new hint once the one used is 100 transactions old (or there was none, or too many
    -- jobs were made ready since), from the first probe, when it ran before this transaction
    -- had an id of its own (its later writes then have ids the snapshot does not see, so they
    -- count as made ready since)
    IF v_snap IS NOT NULL
       AND (v_hxmax IS NULL OR pg_catalog.pg_snapshot_xmax(v_snap)::text::bigint
                               OPERATOR(pg_catalog.-) v_hxmax::text::bigint OPERATOR(pg_catalog.>) 100) THEN
        PERFORM broker._save_claim_hint(p_job_queue, v_snap, v_fp, v_fr, v_fid);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_get(integer, bigint, integer, integer, uuid) IS
    'Claims up to p_batch_size ready jobs of a queue (priority, then oldest) with a lease; returns them with their lease_token (derived from p_lease_token, the claim''s token, when given). Skips blocked, future and locked jobs.';
