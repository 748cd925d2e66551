-- sql/core/notify.sql: the NOTIFY that wakes runners (channel and payload).
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
