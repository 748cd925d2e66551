-- A runner serving databases in turns parks its instance between visits and resumes the same row;
-- another instance registering meanwhile replaces the parked one (cross-session: the pytest of turns).
BEGIN;
SELECT plan(19);

CREATE TEMP TABLE i AS SELECT broker.broker_register_instance('turns', 'host1', 4242, 4, '0.2.0') AS id;
GRANT SELECT ON i TO broker_runtime;
SET LOCAL ROLE broker_runtime;
SELECT is(broker.broker_park_instance((SELECT id FROM i)), true, 'the active instance parks');
RESET ROLE;
SELECT results_eq($$SELECT status, stopped_at IS NOT NULL FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM i)$$,
                  $$VALUES ('parked', true)$$, 'marked parked, with the time it parked');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                       AND classid = 1651665664 AND objid = 0), 'parking released the lock');
SELECT is(broker._active_instance(), NULL, 'a parked instance is not the active one: no claim names it');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, (SELECT id FROM i))$$, '55000', NULL, 'claims while parked: 55000');
SELECT is(broker.broker_park_instance((SELECT id FROM i)), false, 'parking twice: false');
SELECT throws_ok($$INSERT INTO broker.broker_queueinstance (instance_name, queue_count) VALUES ('second', 4)$$, '23505', NULL,
                 'no second current instance beside a parked one');

SET LOCAL ROLE broker_runtime;
SELECT is(broker.broker_resume_instance((SELECT id FROM i)), true, 'the next visit resumes it');
RESET ROLE;
SELECT results_eq($$SELECT status, stopped_at IS NULL, backend_pid = pg_backend_pid() FROM broker.broker_queueinstance
                     WHERE instance_id = (SELECT id FROM i)$$,
                  $$VALUES ('active', true, true)$$, 'active again, same id, in this session');
SELECT is(broker._active_instance(), (SELECT id FROM i), 'claims name it again');
SELECT ok(broker.broker_ping_instance((SELECT id FROM i)) IS NOT NULL, 'it pings');
SELECT throws_ok($$SELECT broker.broker_resume_instance(NULL)$$, '22023', NULL, 'NULL id: 22023');

-- replaced while parked: the newcomer stops it, and a later resume says false and keeps no lock
SELECT broker.broker_park_instance((SELECT id FROM i));
CREATE TEMP TABLE j AS SELECT broker.broker_register_instance('newcomer') AS id;
SELECT is((SELECT status FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM i)), 'stopped',
          'a registration stops the parked instance');
SELECT broker.broker_shutdown_instance((SELECT id FROM j));
SELECT is(broker.broker_resume_instance((SELECT id FROM i)), false, 'no longer parked: resume says false');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                       AND classid = 1651665664 AND objid = 0), 'and keeps no lock');
SELECT is(broker.broker_park_instance((SELECT id FROM j)), false, 'a stopped instance does not park');

-- the runner stops while parked: its instance is stopped from any session, and cannot be resumed
CREATE TEMP TABLE k AS SELECT broker.broker_register_instance('stops-parked') AS id;
SELECT broker.broker_park_instance((SELECT id FROM k));
SELECT is(broker.broker_shutdown_instance((SELECT id FROM k)), true, 'a parked instance is shut down');
SELECT is((SELECT status FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM k)), 'stopped', 'marked stopped');
SELECT is(broker.broker_resume_instance((SELECT id FROM k)), false, 'and not resumed');

SELECT * FROM finish();
ROLLBACK;
