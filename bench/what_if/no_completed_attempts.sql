-- What if completed attempts were not recorded (bench/drain_cpu.py BENCH_CPU_WHAT_IF): the attempt
-- history's share of a drain. Not a configuration of pgsql_broker: every attempt is recorded.
CREATE OR REPLACE FUNCTION broker._record_attempts(p_job_ids bigint[], p_outcome text, p_sqlstates text[] DEFAULT NULL,
    p_messages text[] DEFAULT NULL, p_outputs text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_outcome OPERATOR(pg_catalog.<>) 'completed' THEN
        RAISE EXCEPTION 'bench what-if: only completed attempts are left out, got %', p_outcome;
    END IF;
END;
$$;
