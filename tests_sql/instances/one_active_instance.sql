-- Instance registration in one session (cross-session: tests_py/test_instances.py).
BEGIN;
SELECT plan(15);

CREATE TEMP TABLE i AS SELECT broker.broker_register_instance('pgsql-broker', 'host1', 4242, 4, '0.1.0') AS id;
SELECT results_eq($$SELECT status, instance_name, hostname, os_pid, queue_count, backend_pid = pg_backend_pid()
                      FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM i)$$,
    $$VALUES ('active', 'pgsql-broker', 'host1', 4242, 4, true)$$, 'registered as the active instance');
SELECT ok(EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                   AND classid = 1651665664 AND objid = 0), 'the session holds the instance lock');
SELECT throws_ok($$SELECT broker.broker_register_instance('again')$$, '55000', NULL,
    'registering twice from one session: 55000');
SELECT ok(broker.broker_ping_instance((SELECT id FROM i)) IS NOT NULL, 'ping returns the time');
SELECT throws_ok('SELECT broker.broker_ping_instance(987654321)', '55000', NULL, 'pinging an unknown instance: 55000');
SELECT is(broker.broker_shutdown_instance((SELECT id FROM i)), true, 'shutdown of the active instance');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                       AND classid = 1651665664 AND objid = 0), 'shutdown released the lock');
SELECT is((SELECT status FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM i)), 'stopped', 'marked stopped');
SELECT is(broker.broker_shutdown_instance((SELECT id FROM i)), false, 'a second shutdown is a no-op');
SELECT throws_ok($$SELECT broker.broker_register_instance(' ')$$, '22023', NULL, 'blank name: 22023');

-- broker_stale_instance_holder: never this session's own lock, never a row that pinged recently
CREATE TEMP TABLE j AS SELECT broker.broker_register_instance('pgsql-broker') AS id;
SELECT is(broker.broker_stale_instance_holder(interval '60 seconds'), NULL, 'a holder that just pinged is not stale');
UPDATE broker.broker_queueinstance SET last_ping_at = now() - interval '1 hour' WHERE instance_id = (SELECT id FROM j);
SELECT is(broker.broker_stale_instance_holder(interval '60 seconds'), NULL,
          'the calling session is never named (it holds the lock itself)');
SELECT throws_ok($$SELECT broker.broker_stale_instance_holder(interval '0.5 seconds')$$, '22023', NULL,
                 'under a second: 22023');
SELECT throws_ok($$SELECT broker.broker_stale_instance_holder(NULL)$$, '22023', NULL, 'NULL: 22023');
SELECT is(broker.broker_shutdown_instance((SELECT id FROM j)), true, 'and it shuts down as usual');
-- (a holder in another session, stale or not: tests_py/poolers/test_runner_works_in_session_pooling_and_refuses_transaction_pooling.py)

SELECT * FROM finish();
ROLLBACK;
