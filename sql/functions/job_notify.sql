-- ---------------------------------------------------------------------------
-- Function: broker._notify_queues(p_queues)
--   Wake-up hint for runners: one NOTIFY on channel pgsql_broker per queue,
--   payload '<database>/<queue>'. Delivered only on commit; PostgreSQL folds
--   identical notifications of one transaction into one.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_queues(p_queues integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgsql_broker',
                                 pg_catalog.current_database() OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) d.q::text)
       FROM (SELECT DISTINCT q FROM pg_catalog.unnest(p_queues) AS q WHERE q IS NOT NULL) AS d;
END;
$$;
COMMENT ON FUNCTION broker._notify_queues(integer[]) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/<queue>'' once per distinct queue (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_cancel(p_job_id)
--   Tells runners that job p_job_id has a cancel request: NOTIFY on channel
--   pgsql_broker, payload '<database>/cancel/<job id>' (sent on commit, so
--   the request is visible when it arrives). The runner holding the job
--   cancels the statement running it; every other runner ignores it.
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
