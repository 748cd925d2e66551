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
-- Trigger function: broker._jobs_notify_insert()
--   Statement-level AFTER INSERT on broker_jobs: one notification per queue
--   that received a job claimable now.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_notify_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- broker_add_job sets this while it inserts a job whose dependencies it
    -- adds next, and notifies itself once they are counted.
    IF pg_catalog.current_setting('broker.defer_notify', true) OPERATOR(pg_catalog.=) 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM broker._notify_queues(ARRAY(
        SELECT DISTINCT n.job_queue FROM new_jobs AS n
         WHERE n.complete_status OPERATOR(pg_catalog.=) 0
           AND n.pending_deps OPERATOR(pg_catalog.=) 0
           AND n.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()));
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._jobs_notify_insert() IS
    'Internal trigger: after an INSERT statement on broker_jobs, notify each queue that got a claimable job.';

CREATE TRIGGER broker_jobs_notify_insert_trg
    AFTER INSERT ON broker.broker_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._jobs_notify_insert();
COMMENT ON TRIGGER broker_jobs_notify_insert_trg ON broker.broker_jobs IS
    'One NOTIFY per INSERT statement and queue with claimable jobs.';
