-- The claim is index-backed: its cost must not grow with finished, blocked or future jobs.
BEGIN;
SELECT plan(8);

-- A realistic mix: many finished, blocked and future jobs, a few ready ones.
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'done', 'done', 'SELECT 1', 2, now() FROM generate_series(1, 20000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, pending_deps)
SELECT 'blocked', 'blocked', 'SELECT 1', 1 FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_priority, run_after)
SELECT 'future', 'future', 'SELECT 1', 5, now() + interval '1 hour' FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str)
SELECT 'ready', 'ready', 'SELECT 1' FROM generate_series(1, 10);
ANALYZE broker.broker_jobs;

-- EXPLAIN broker_get's statements exactly as the function has them (the text between
-- its <marker> comments), with its variables as parameters.
CREATE FUNCTION pg_temp.plan_of(p_marker text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    v_src text := (SELECT prosrc FROM pg_proc WHERE oid = 'broker.broker_get(integer,bigint,integer,integer)'::regprocedure);
    v_sql text;
    v_plan json;
BEGIN
    v_sql := substring(v_src FROM '-- <' || p_marker || '>[^\n]*\n(.*)-- </' || p_marker || '>');
    IF v_sql IS NULL THEN
        RETURN NULL;
    END IF;
    v_sql := replace(v_sql, ' INTO v_priority', '');
    v_sql := regexp_replace(v_sql, '\mp_job_queue\M', '$1', 'g');
    v_sql := regexp_replace(v_sql, '\mv_priority\M', '$2', 'g');
    v_sql := regexp_replace(v_sql, '\mv_now\M', '$3', 'g');
    v_sql := regexp_replace(v_sql, '\mv_left\M', '$4', 'g');
    v_sql := regexp_replace(v_sql, '\mv_lease\M', '$5', 'g');
    v_sql := regexp_replace(v_sql, '\mp_instance_id\M', '$6', 'g');
    v_sql := regexp_replace(v_sql, '\mv_bound\M', '$7', 'g');
    EXECUTE 'PREPARE pg_temp_q(integer, integer, timestamptz, integer, integer, bigint, bigint) AS ' || v_sql;
    EXECUTE 'EXPLAIN (FORMAT JSON) EXECUTE pg_temp_q(1, 0, now(), 10, 60, NULL, 2147483648)' INTO v_plan;
    DEALLOCATE pg_temp_q;
    RETURN v_plan::text;
END;
$f$;

SELECT ok(pg_temp.plan_of('claim-query') IS NOT NULL AND pg_temp.plan_of('priority-probe') IS NOT NULL,
          'broker_get has the marked probe and claim statements');
SET LOCAL plan_cache_mode = force_custom_plan;
SELECT matches(pg_temp.plan_of('claim-query'), '"Index Name": "broker_jobs_claim_idx"', 'custom plan: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-query') || pg_temp.plan_of('priority-probe'), '"Node Type": "Seq Scan"',
                    'custom plans: no sequential scan');
SELECT cmp_ok((SELECT count(*)::integer FROM regexp_matches(pg_temp.plan_of('priority-probe'), '"Index Name": "broker_jobs_claim_idx"', 'g')),
          '>=', 2, 'custom plan: the level probe and the ready check use broker_jobs_claim_idx');
SET LOCAL plan_cache_mode = force_generic_plan;
SELECT matches(pg_temp.plan_of('claim-query'), '"Index Name": "broker_jobs_claim_idx"', 'generic plan: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-query') || pg_temp.plan_of('priority-probe'), '"Node Type": "Seq Scan"',
                    'generic plans: no sequential scan');

-- And the function as it runs: no sequential scan of broker_jobs at all.
RESET plan_cache_mode;
CREATE TEMP TABLE seq_before AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass;
CREATE TEMP TABLE claimed AS SELECT job_name FROM broker.broker_get(1, NULL, 60, 4);
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass),
          (SELECT seq_scan FROM seq_before), 'broker_get ran without a sequential scan of broker_jobs');
SELECT is((SELECT array_agg(DISTINCT job_name) FROM claimed), ARRAY['ready'], 'only ready jobs were claimed');

SELECT * FROM finish();
ROLLBACK;
