-- sql/core/states.sql: the job states by name, and what "claimable" means.
-- ---------------------------------------------------------------------------
-- Job states (broker_jobs.complete_status; drawn in docs/state-machine.md):
--   0 pending    waiting to be claimed (claimable once pending_deps = 0 and run_after is reached)
--   1 running    claimed, under a lease
--   2 completed  final
--   3 failed     final: its last attempt failed
--   4 cancelled  final: cancelled, or a dependency of it failed or was cancelled
-- Function bodies name states with broker._state('name'). The table's CHECK
-- constraints, index predicates and policies keep the numbers (a partial
-- index is used only when the query's predicate matches it literally).
-- Both functions are SQL without SET search_path so that the planner inlines
-- them (and folds _state of a literal to a constant): they cost nothing in
-- the claim; every operator in them is schema-qualified.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._state(p_name)
--   The complete_status of state p_name (pending, running, completed, failed,
--   cancelled); NULL for any other name.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._state(p_name text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_name OPERATOR(pg_catalog.=) 'pending' THEN 0
                WHEN p_name OPERATOR(pg_catalog.=) 'running' THEN 1
                WHEN p_name OPERATOR(pg_catalog.=) 'completed' THEN 2
                WHEN p_name OPERATOR(pg_catalog.=) 'failed' THEN 3
                WHEN p_name OPERATOR(pg_catalog.=) 'cancelled' THEN 4 END
$$;
COMMENT ON FUNCTION broker._state(text) IS
    'Internal: the complete_status number of a job state by name (pending 0, running 1, completed 2, failed 3, cancelled 4).';

-- ---------------------------------------------------------------------------
-- Function: broker._parked(p_name)
--   The broker_jobs.parked number of a reason a pending job is kept out of
--   the claim index: none 0, later 1 (until its run_after), cap 2 (its
--   concurrency key at its cap), rate 3 (its key out of tokens).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._parked(p_name text)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (CASE WHEN p_name OPERATOR(pg_catalog.=) 'none' THEN 0
                 WHEN p_name OPERATOR(pg_catalog.=) 'later' THEN 1
                 WHEN p_name OPERATOR(pg_catalog.=) 'cap' THEN 2
                 WHEN p_name OPERATOR(pg_catalog.=) 'rate' THEN 3 END)::smallint
$$;
COMMENT ON FUNCTION broker._parked(text) IS
    'Internal: the parked number of a reason a pending job is out of the claim index (none 0, later 1, cap 2, rate 3).';

-- ---------------------------------------------------------------------------
-- Function: broker._due_time()
--   The time a write takes a job's run_after against: a job dated after it
--   is parked later, one dated at or before it is due (and its queue is
--   notified). The statement's start, or its transaction's when that is
--   later: a procedure that commits goes on in a new transaction under the
--   same statement, and a job it then enqueues for now() (its default) is
--   due, not dated after the CALL began. In an ordinary transaction the
--   statement starts last, so this is statement_timestamp(). SQL without
--   SET search_path, so that it is inlined; the parking trigger's WHEN
--   writes the same expression out (a function call there is inlined again
--   at every INSERT statement).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._due_time()
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT GREATEST(pg_catalog.statement_timestamp(), pg_catalog.transaction_timestamp()) $$;
COMMENT ON FUNCTION broker._due_time() IS
    'Internal: the time a write compares run_after with (the statement''s start, or its transaction''s when later, as in a procedure after COMMIT).';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable(p_complete_status, p_pending_deps, p_parked)
--   Whether a job may be claimed, run_after aside: pending, waiting on no
--   dependency, and not parked (by its run_after or its key's limit). The
--   claim index broker_jobs_claim_idx has this predicate written out
--   (sql/tables/broker_jobs.sql), and so has the WHEN of the trigger
--   broker_jobs_ready_xid_trg (sql/run/claim_hint.sql; held to it by
--   tests_sql/run/ready_xid_trigger_condition_is_claimable_written_out.sql);
--   inlined, this function is the same
--   expression, so the claim still uses that index
--   (tests_sql/run/claim_is_index_backed.sql).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_complete_status OPERATOR(pg_catalog.=) 0 AND p_pending_deps OPERATOR(pg_catalog.=) 0
           AND p_parked OPERATOR(pg_catalog.=) 0
$$;
COMMENT ON FUNCTION broker._claimable(smallint, integer, smallint) IS
    'Internal: pending, waiting on no unfinished dependency and not parked (the claim index predicate, inlined).';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable_by_xid(p_complete_status, p_pending_deps, p_parked)
--   _claimable written with <= (the same rows: the CHECKs keep the three
--   columns >= 0), the predicate of broker_jobs_ready_xid_idx. A claim that
--   looks for the jobs made ready since its queue's hint says this, not
--   _claimable, so that no index but that one matches: with the claim
--   index's predicate the planner could read the claim index in claim order
--   and filter on ready_xid, over every ready job (sql/run/claim.sql).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable_by_xid(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_complete_status OPERATOR(pg_catalog.<=) 0 AND p_pending_deps OPERATOR(pg_catalog.<=) 0
           AND p_parked OPERATOR(pg_catalog.<=) 0
$$;
COMMENT ON FUNCTION broker._claimable_by_xid(smallint, integer, smallint) IS
    'Internal: _claimable written with <= (the predicate of broker_jobs_ready_xid_idx, inlined), for the jobs a claim adds to its queue''s hint.';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable_by_id(p_complete_status, p_pending_deps, p_parked)
--   _claimable written so that no partial index's predicate matches it (in a
--   CASE, which the planner does not prove index predicates from; the
--   columns are NOT NULL, so the rows are the same). A statement
--   that locks given jobs (by their row versions, the claim's lock in
--   sql/run/claim_lane.sql) says this: with _claimable, a generic plan can
--   read the whole claim index and filter on the given rows instead of
--   fetching each.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable_by_id(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_complete_status OPERATOR(pg_catalog.=) 0 AND p_pending_deps OPERATOR(pg_catalog.=) 0
                     AND p_parked OPERATOR(pg_catalog.=) 0 THEN true ELSE false END
$$;
COMMENT ON FUNCTION broker._claimable_by_id(smallint, integer, smallint) IS
    'Internal: _claimable written so that no partial index matches it, for statements that lock given jobs (inlined).';
