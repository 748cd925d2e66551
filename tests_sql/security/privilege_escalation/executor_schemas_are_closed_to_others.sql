-- Nobody else can put a function next to a role's executor.
BEGIN;
SELECT plan(2);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_create_executor('broker_test_alice');

SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok(format($$CREATE FUNCTION %I.run_job(text, text, text, text DEFAULT NULL) RETURNS void LANGUAGE sql AS 'SELECT NULL'$$,
                        'broker_exec_' || 'broker_test_alice'::regrole::oid),
    '42501', NULL, 'another role cannot create functions in alice''s executor schema');
RESET ROLE;
SELECT ok(broker._executor('broker_test_alice') IS NOT NULL, 'alice''s executor is intact');

SELECT * FROM finish();
ROLLBACK;
