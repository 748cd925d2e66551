-- Test helper (included with \ir, not a test file): claim the next job of a
-- queue, run it, and return its name (NULL when nothing is claimable).
CREATE FUNCTION pg_temp.run_next(q integer DEFAULT 1) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE v_id bigint; v_name text;
BEGIN
    SELECT g.job_id, g.job_name INTO v_id, v_name FROM broker.broker_get(q) AS g;
    IF v_id IS NULL THEN RETURN NULL; END IF;
    PERFORM broker.broker_run(v_id);
    RETURN v_name;
END $f$;
