-- What if the superuser's executor (broker_exec_10: the drain's jobs run as the bootstrap superuser)
-- ran each job's SQL itself, without the call of run_job and its SET clause, and set only what a job
-- of the drain needs (bench/drain_cpu.py BENCH_CPU_WHAT_IF): the cost of the executor's layering.
-- Not a configuration of pgsql_broker: it drops the job's application_name, its language, its
-- output and the reset of the settings a job may leave between jobs.
CREATE OR REPLACE FUNCTION broker_exec_10.run_jobs(p_sqls text[], p_languages text[], p_search_paths text[], p_tenant_id text)
RETURNS TABLE (error_sqlstate text, error_message text, duration interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_started timestamptz;
    v_set     text;
    v_rows    bigint;
BEGIN
    v_set := pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_sqls, 1), 0) LOOP
        error_sqlstate := NULL;
        error_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        BEGIN
            v_set := pg_catalog.set_config('search_path', p_search_paths[i] OPERATOR(pg_catalog.||) ', pg_temp', true);
            EXECUTE p_sqls[i];
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            error_message := v_rows::text OPERATOR(pg_catalog.||) pg_catalog.chr(31);
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS error_sqlstate = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        END;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
    END LOOP;
END;
$body$;
