-- A tenant sees only the task names it uses, but the planner's statistics are the whole table's:
-- with a histogram of task_name (text comparison is leakproof, so the planner uses it under row-level
-- security), an attacker's EXPLAIN of broker_task_queue or broker_task_name_tenant WHERE task_name > X
-- would estimate more or fewer rows as X passed another tenant's names, enough to close in on them by
-- bisection (the more names, the finer the estimate). The task_name columns of both
-- tables keep no statistics (SET STATISTICS 0), so the estimates say nothing of the names.
BEGIN;
SELECT plan(4);

CREATE ROLE broker_test_stats_a NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_stats_b NOLOGIN IN ROLE broker_enqueue;
CREATE FUNCTION public.broker_test_estimate(p_query text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE v_plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || p_query INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric;
END;
$$;
GRANT EXECUTE ON FUNCTION public.broker_test_estimate(text) TO PUBLIC;

SET LOCAL SESSION AUTHORIZATION broker_test_stats_b;
SELECT count(*) FROM generate_series(1, 60) AS g,
       LATERAL broker.broker_add_task('b_secret_' || pg_catalog.lpad(g::text, 2, '0'), '{}', p_tenant_id => 'b') AS t;
RESET SESSION AUTHORIZATION;
ANALYZE broker.broker_task_queue;
ANALYZE broker.broker_task_name_tenant;

SELECT is((SELECT count(*) FROM pg_statistic AS s JOIN pg_attribute AS a ON a.attrelid = s.starelid AND a.attnum = s.staattnum
            WHERE s.starelid IN ('broker.broker_task_queue'::regclass, 'broker.broker_task_name_tenant'::regclass)
              AND a.attname = 'task_name'), 0::bigint,
          'ANALYZE keeps no statistics of the task names');

SET LOCAL SESSION AUTHORIZATION broker_test_stats_a;
SELECT broker.broker_set_tenant('a');
SELECT is(public.broker_test_estimate($$SELECT FROM broker.broker_task_queue WHERE task_name > 'b_secret_05'$$),
          public.broker_test_estimate($$SELECT FROM broker.broker_task_queue WHERE task_name > 'b_secret_55'$$),
          'a''s estimates of broker_task_queue are the same on either side of b''s names');
SELECT is(public.broker_test_estimate($$SELECT FROM broker.broker_task_name_tenant WHERE task_name > 'b_secret_05'$$),
          public.broker_test_estimate($$SELECT FROM broker.broker_task_name_tenant WHERE task_name > 'b_secret_55'$$),
          'and of broker_task_name_tenant');
SELECT is(ARRAY(SELECT task_name FROM broker.broker_task_queue), '{}'::text[], 'while a reads none of b''s names');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
