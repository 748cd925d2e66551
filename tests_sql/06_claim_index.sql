-- The claim is index-backed: its cost must not grow with finished, blocked or future jobs.
BEGIN;
SELECT plan(6);

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

-- EXPLAIN the claim statement exactly as broker_get has it (text between its markers).
CREATE FUNCTION pg_temp.claim_plan() RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    v_src text := (SELECT prosrc FROM pg_proc WHERE oid = 'broker.broker_get(integer,bigint,integer,integer)'::regprocedure);
    v_sql text;
    v_plan json;
BEGIN
    v_sql := substring(v_src FROM '-- <claim-query>[^\n]*\n(.*)-- </claim-query>');
    v_sql := regexp_replace(v_sql, '\mp_job_queue\M', '$1', 'g');
    v_sql := regexp_replace(v_sql, '\mv_priority\M', '$2', 'g');
    v_sql := regexp_replace(v_sql, '\mv_now\M', '$3', 'g');
    v_sql := regexp_replace(v_sql, '\mv_left\M', '$4', 'g');
    v_sql := regexp_replace(v_sql, '\mv_lease\M', '$5', 'g');
    v_sql := regexp_replace(v_sql, '\mp_instance_id\M', '$6', 'g');
    EXECUTE 'PREPARE pg_temp_claim(integer, integer, timestamptz, integer, integer, bigint) AS ' || v_sql;
    EXECUTE 'EXPLAIN (FORMAT JSON) EXECUTE pg_temp_claim(1, 0, now(), 10, 60, NULL)' INTO v_plan;
    DEALLOCATE pg_temp_claim;
    RETURN v_plan::text;
END;
$f$;

SELECT ok(length(substring((SELECT prosrc FROM pg_proc WHERE oid = 'broker.broker_get(integer,bigint,integer,integer)'::regprocedure)
                 FROM '-- <claim-query>[^\n]*\n(.*)-- </claim-query>')) > 100, 'broker_get has the marked claim query');
SET LOCAL plan_cache_mode = force_custom_plan;
SELECT matches(pg_temp.claim_plan(), '"Index Name": "broker_jobs_claim_idx"', 'custom plan: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.claim_plan(), '"Node Type": "Seq Scan"', 'custom plan: no sequential scan');
SET LOCAL plan_cache_mode = force_generic_plan;
SELECT matches(pg_temp.claim_plan(), '"Index Name": "broker_jobs_claim_idx"', 'generic plan: the claim uses broker_jobs_claim_idx');

-- And the function as it runs: no sequential scan of broker_jobs at all.
RESET plan_cache_mode;
CREATE TEMP TABLE seq_before AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass;
CREATE TEMP TABLE claimed AS SELECT job_name FROM broker.broker_get(1, NULL, 60, 4);
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass),
          (SELECT seq_scan FROM seq_before), 'broker_get ran without a sequential scan of broker_jobs');
SELECT is((SELECT array_agg(DISTINCT job_name) FROM claimed), ARRAY['ready'], 'only ready jobs were claimed');

SELECT * FROM finish();
ROLLBACK;
