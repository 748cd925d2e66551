-- A task worker (broker_worker) names its tenant as every client does, with broker_set_tenant, in a
-- session of its own: the role may execute every function broker_set_tenant calls (it runs with the
-- caller's rights). broker_set_tenant is the first thing this file calls: a session that ran it
-- before as another role would have its plan cached, and pass.
BEGIN;
SELECT plan(3);

CREATE ROLE broker_test_worker NOLOGIN IN ROLE broker_worker;
SET LOCAL SESSION AUTHORIZATION broker_test_worker;
SELECT lives_ok($$SELECT broker.broker_set_tenant('a')$$, 'a worker sets its tenant with broker_set_tenant');
SELECT is(broker.broker_current_tenant(), 'a', 'and acts for it');
SELECT is(ARRAY(SELECT task FROM broker.broker_claim_tasks(ARRAY['render'])), '{}'::text[], 'it claims there');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
