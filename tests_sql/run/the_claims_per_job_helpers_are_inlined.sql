-- The functions a claim calls for each job it writes, or at each task call, are inlined into the
-- statements that call them (no SET clause, no SECURITY DEFINER): a call that is not inlined is
-- parsed and planned again in every transaction.
BEGIN;
SELECT plan(4);

CREATE FUNCTION pg_temp.plan_text(p_query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    v_line text;
    v_text text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || p_query LOOP
        v_text := v_text || v_line || E'\n';
    END LOOP;
    RETURN v_text;
END;
$f$;

SELECT unalike(pg_temp.plan_text($$SELECT broker._claim_job_token('00000000-0000-0000-0000-000000000001', j.job_id)
                                     FROM broker.broker_jobs AS j$$), '%_claim_job_token%',
               'a job''s lease token from the claim''s token is computed in the claim''s UPDATE, not called');
SELECT alike(pg_temp.plan_text($$SELECT broker._claim_job_token('00000000-0000-0000-0000-000000000001', j.job_id)
                                   FROM broker.broker_jobs AS j$$), '%md5%', '(its md5 is)');
SELECT unalike(pg_temp.plan_text($$SELECT broker._task_actor()$$), '%_task_actor%',
               'the role a task function acts for is read in the statement, not called');
SELECT alike(pg_temp.plan_text($$SELECT broker._task_actor()$$), '%current_setting%', '(its current_setting is)');

SELECT * FROM finish();
ROLLBACK;
