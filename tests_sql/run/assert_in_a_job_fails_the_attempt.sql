-- A failed ASSERT in a job fails the attempt like any error; broker_run returns.
BEGIN;
SELECT plan(1);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('assert', $$BEGIN ASSERT false, 'escaped'; END$$, 6, 0, 'plpgsql');
RESET ROLE;
SELECT results_eq($$SELECT r.complete_status, r.error_sqlstate, r.error_message
                      FROM broker.broker_get(6) g, LATERAL broker.broker_run(g.job_id) r$$,
    $$VALUES (3::smallint, 'P0004', 'escaped')$$, 'a failed ASSERT is recorded; broker_run returns');

SELECT * FROM finish();
ROLLBACK;
