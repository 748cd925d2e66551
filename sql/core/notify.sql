-- sql/core/notify.sql: the NOTIFY that wakes runners (channel and payload).
-- ---------------------------------------------------------------------------
-- Runners LISTEN on channel pgsql_broker; the payload is '<database>/<queue>'
-- (a queue has a job to claim), '<database>/cancel/<job id>' (a running job
-- has a cancel request) or '<database>/due' (a job was parked until a time:
-- the runner asks broker_next_due again, so that its poll comes then).
-- broker._notify_queue, broker._notify_cancel and broker._notify_due write
-- them, and nothing else notifies that channel (task workers LISTEN on
-- pgsql_broker_task, where _notify_queue tells a task name's queue,
-- '<database>/<negative queue>', broker_task_queue) (schedule changes have their own, pgsql_broker_schedule:
-- broker._schedule_notify in sql/schedules/schedules.sql). A queue is notified when it gets a job claimable now: by the
-- jobs' INSERT trigger (broker._jobs_after_insert), by releases of
-- dependents, and by the enqueue functions once they have added a job's
-- dependencies.
-- broker.defer_notify: while this transaction-local setting is 'on', the
-- INSERT trigger sends nothing. broker_add_job and broker_add_jobs set it
-- while they insert jobs whose dependency edges they add next (a job that
-- looks claimable at INSERT may not be once its edges are in), reset it, and
-- notify themselves once the edges are counted.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._notify_queue(p_queue)
--   NOTIFY pgsql_broker, '<database>/<queue>'. SQL without SET search_path,
--   so that the planner inlines it into the trigger's one statement; every
--   call and operator is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_queue(p_queue integer)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    -- (a task's queue is negative: its workers, not the runners, listen on pgsql_broker_task)
    SELECT pg_catalog.pg_notify(CASE WHEN p_queue OPERATOR(pg_catalog.<) 0 THEN 'pgsql_broker_task' ELSE 'pgsql_broker' END,
                                pg_catalog.current_database() OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) p_queue::pg_catalog.text)
$$;
COMMENT ON FUNCTION broker._notify_queue(integer) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/<queue>'' (sent on commit): the one writer of the runners'' wake-up; for a task''s queue (negative), on pgsql_broker_task, its workers'' wake-up.';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_queues(p_queues)
--   Wake-up hint for runners: one NOTIFY on channel pgsql_broker per queue,
--   payload '<database>/<queue>'. Delivered only on commit; PostgreSQL folds
--   identical notifications of one transaction into one.
--   Calls: _notify_queue
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_queues(p_queues integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM broker._notify_queue(d.q)
       FROM (SELECT DISTINCT q FROM pg_catalog.unnest(p_queues) AS q WHERE q IS NOT NULL) AS d;
END;
$$;
COMMENT ON FUNCTION broker._notify_queues(integer[]) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/<queue>'' once per distinct queue (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_cancel(p_job_id)
--   NOTIFY pgsql_broker, '<database>/cancel/<job id>' (sent on commit, so the
--   cancel request is visible when it arrives): the runner executing the job
--   checks the request (broker_cancel_requests) and cancels its statement;
--   every other runner ignores it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_cancel(p_job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgsql_broker',
                                 pg_catalog.current_database() OPERATOR(pg_catalog.||) '/cancel/' OPERATOR(pg_catalog.||) p_job_id::text);
END;
$$;
COMMENT ON FUNCTION broker._notify_cancel(bigint) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/cancel/<job id>'' (sent on commit): a running job has a cancel request.';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_due()
--   NOTIFY pgsql_broker, '<database>/due' (sent on commit): a job was parked
--   until a time (enqueued or retried for later, or held back by its key's
--   rate until its next tokens), so the time the runner's poll waits for
--   (broker_next_due) may have come nearer; the runner asks it again instead
--   of at its next regular poll. Called by the parking triggers and the
--   claim, never on the path of a job due now.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_due()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgsql_broker', pg_catalog.current_database() OPERATOR(pg_catalog.||) '/due');
END;
$$;
COMMENT ON FUNCTION broker._notify_due() IS
    'Internal: NOTIFY pgsql_broker, ''<database>/due'' (sent on commit): a job was parked until a time; runners ask broker_next_due again.';
