-- SQL that commits, or that can never run in a transaction, hidden where the enqueue-time check cannot see it (a
-- procedure's COMMIT, an EXECUTE) fails when it runs (2D000, 25001), and the stored message names the opt-in, in
-- broker_run and broker_run_batch alike. Other errors keep their message as it was.
BEGIN;
SELECT plan(3);

CREATE ROLE broker_test_cm_etl NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE, CREATE ON SCHEMA public TO broker_test_cm_etl;
SET LOCAL ROLE broker_test_cm_etl;
CREATE TABLE public.cm_items (done boolean);
CREATE PROCEDURE public.cm_chunks() LANGUAGE plpgsql AS $$BEGIN UPDATE public.cm_items SET done = true; COMMIT; END $$;
SELECT broker.broker_add_job('call', 'CALL public.cm_chunks()', 41, p_max_attempts => 1);
SELECT broker.broker_add_job('hidden vacuum', $$BEGIN EXECUTE 'VACUUM public.cm_items'; END$$, 42, 0, 'plpgsql', p_max_attempts => 1);
SELECT broker.broker_add_job('other', 'SELECT 1 / 0', 42, p_max_attempts => 1);
RESET ROLE;

CREATE FUNCTION pg_temp.opt_in(p_message text) RETURNS text LANGUAGE sql AS $$
    SELECT p_message || ' (a job runs inside a transaction: SQL that commits, or that cannot run in one, runs as an '
                        'autonomous job: p_autonomous => true, docs/jobs.md)' $$;
SELECT results_eq($$SELECT r.complete_status, r.error_sqlstate, r.error_message
                      FROM broker.broker_get(41) AS g, LATERAL broker.broker_run(g.job_id) AS r$$,
    $$VALUES (3::smallint, '2D000', pg_temp.opt_in('invalid transaction termination'))$$,
    'broker_run: a CALL of a procedure that commits fails with 2D000, the message naming the opt-in');
CREATE TEMP TABLE claimed AS SELECT g.job_id FROM broker.broker_get(42, NULL, 60, 10) AS g;
SELECT results_eq($$SELECT r.error_sqlstate, r.error_message FROM broker.broker_run_batch(ARRAY(SELECT job_id FROM claimed ORDER BY job_id)) AS r
                     ORDER BY r.job_id$$,
    $$VALUES ('25001', pg_temp.opt_in('VACUUM cannot run inside a transaction block')), ('22012', 'division by zero')$$,
    'broker_run_batch: a hidden VACUUM fails with 25001, named the same way; another error keeps its message');
SELECT is((SELECT last_error_message FROM broker.broker_jobs WHERE job_name = 'call'),
          pg_temp.opt_in('invalid transaction termination'), 'the job keeps the message');

SELECT * FROM finish();
ROLLBACK;
