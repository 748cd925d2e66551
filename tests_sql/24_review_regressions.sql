-- Regressions from the adversarial review: each block reproduces an attack that once worked.
BEGIN;
SELECT plan(12);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;
CREATE TABLE public.orders (id int, note text);
GRANT INSERT, SELECT ON public.orders TO broker_test_alice;
CREATE TABLE public.loot (what text);
GRANT INSERT ON public.loot TO PUBLIC;

-- F1: temporary objects left in the runner's session by one job must not capture the next job's names
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('evil');
SELECT broker.broker_add_job('plant', $job$
CREATE TEMP TABLE orders (id int, note text);
GRANT ALL ON pg_temp.orders TO PUBLIC;
CREATE FUNCTION pg_temp.spy() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN INSERT INTO public.loot VALUES (current_user || ': ' || NEW.note); RETURN NEW; END $f$;
CREATE TRIGGER spy BEFORE INSERT ON pg_temp.orders FOR EACH ROW EXECUTE FUNCTION pg_temp.spy();
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_catalog.length(VALUE) < 0);
$job$, 1, 100);
RESET ROLE;
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_job('order', $$INSERT INTO orders VALUES (1, 'secret order')$$);
SELECT broker.broker_add_job('typed', $$INSERT INTO orders VALUES (2, 'typed'::text)$$);
RESET ROLE;
CREATE TABLE public.f1 AS
SELECT g.job_name, r.complete_status, r.error_message
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
-- a runner resets its session between jobs (DISCARD ALL); here, where pgTAP keeps its own
-- state in temporary tables, drop just the planted objects (they would hijack pgTAP too)
DROP TABLE pg_temp.orders;
DROP DOMAIN pg_temp.text;
DROP FUNCTION pg_temp.spy();
SELECT is((SELECT complete_status FROM public.f1 WHERE job_name = 'plant'), 2::smallint, 'the planting job itself ran');
SELECT is((SELECT array_agg(note ORDER BY id) FROM public.orders), ARRAY['secret order', 'typed'],
          'the next jobs wrote to public.orders, not to the planted temp table');
SELECT is((SELECT count(*) FROM public.loot), 0::bigint, 'the planted trigger never fired');

-- F2: settings a job SETs in the session cannot change other jobs' retries
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('poison', 'SET broker.retry_base_seconds = 2000000000; SET broker.lease_seconds = 1', 2);
RESET ROLE;
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE flaky AS SELECT job_id FROM broker.broker_add_job('flaky', 'SELECT 1/0', 3, p_max_attempts => 5);
RESET ROLE;
SELECT broker.broker_run(job_id) FROM broker.broker_get(2);
SELECT broker.broker_run(job_id) FROM broker.broker_get(3);
SELECT ok((SELECT run_after < clock_timestamp() + interval '10 seconds' FROM broker.broker_jobs
            WHERE job_id = (SELECT job_id FROM flaky)), 'the retry backoff is still the configured one');

-- F3: a job that joined a group while its dependent ran is counted when the dependent retries
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE d AS SELECT job_id FROM broker.broker_add_job('D', 'SELECT 1/0', 4, p_depends_on_groups => ARRAY['g'],
                                                                p_max_attempts => 3);
RESET ROLE;
CREATE TEMP TABLE d_claim AS SELECT * FROM broker.broker_get(4);
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('A', 'SELECT 1', 5, p_job_group => 'g');
RESET ROLE;
SELECT broker.broker_run((SELECT job_id FROM d_claim));
SELECT is((SELECT complete_status::text || '/' || pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM d)),
          '0/1', 'back to pending, D now waits on A');
SELECT lives_ok($$SELECT broker.broker_run(job_id) FROM broker.broker_get(5)$$, 'A completes without breaking the counter');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM d)), 0, 'and releases D');

-- F6: nobody else can put a function next to alice's executor
SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok(format($$CREATE FUNCTION %I.run_job(text, text, text, text DEFAULT NULL) RETURNS void LANGUAGE sql AS 'SELECT NULL'$$,
                        'broker_exec_' || 'broker_test_alice'::regrole::oid),
    '42501', NULL, 'another role cannot create functions in alice''s executor schema');
RESET ROLE;
SELECT ok(broker._executor('broker_test_alice') IS NOT NULL, 'alice''s executor is intact');

-- F7: ASSERT in a job fails the attempt like any error
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('assert', $$BEGIN ASSERT false, 'escaped'; END$$, 6, 0, 'plpgsql');
RESET ROLE;
SELECT results_eq($$SELECT r.complete_status, r.error_sqlstate, r.error_message
                      FROM broker.broker_get(6) g, LATERAL broker.broker_run(g.job_id) r$$,
    $$VALUES (3::smallint, 'P0004', 'escaped')$$, 'a failed ASSERT is recorded; broker_run returns');

-- F8: a job cannot point at another tenant's schedule (and cannot learn whether it exists)
CREATE TEMP TABLE acme_schedule AS
WITH s AS (INSERT INTO broker.broker_schedule (tenant_id, schedule_name, cron_expr, execute_str)
           VALUES ('acme', 'acme nightly', '0 3 * * *', 'SELECT 1') RETURNING schedule_id)
SELECT schedule_id FROM s;
GRANT SELECT ON acme_schedule TO broker_test_mallory;
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('evil');
SELECT throws_ok(format($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, schedule_id) VALUES ('x', 'x', 'SELECT 1', %s)$$,
                        (SELECT schedule_id FROM acme_schedule)),
    '23503', NULL, 'another tenant''s schedule id is refused like a missing one');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name = 'x'), 0::bigint, 'no job was linked');

SELECT * FROM finish();
ROLLBACK;
