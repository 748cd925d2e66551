-- A worker's login sets its tenant (broker_set_tenant) in a session where no other role called it
-- first, as a worker process does: broker_set_tenant's plan is then made for the worker, so every
-- function it calls must be granted to broker_worker. (A plan made earlier for another role had
-- inlined broker._whole_transaction and hid its missing grant: DISCARD PLANS makes them anew.)
BEGIN;
SELECT plan(3);

CREATE ROLE broker_test_worker_fresh NOLOGIN IN ROLE broker_worker;
SET LOCAL SESSION AUTHORIZATION broker_test_worker_fresh;
DISCARD PLANS;
SELECT lives_ok($$SELECT broker.broker_set_tenant('a')$$, 'a worker sets its tenant');
SELECT is(broker.broker_current_tenant(), 'a', 'for the transaction');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['nothing_enqueued'])$$, 'and claims for it');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
