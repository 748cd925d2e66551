-- Instance registration in one session (cross-session: tests_py/test_instances.py).
BEGIN;
SELECT plan(10);

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

SELECT * FROM finish();
ROLLBACK;
