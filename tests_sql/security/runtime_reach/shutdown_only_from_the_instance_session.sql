-- broker_shutdown_instance works only from the instance's own session, as broker_ping_instance:
-- another runtime session cannot mark the active instance stopped (and so let a second
-- runner register next to it).
BEGIN;
SELECT plan(4);

CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('runner') AS id;
GRANT SELECT ON inst TO broker_runtime;
-- the instance of another session (its backend pid is not ours)
UPDATE broker.broker_queueinstance SET backend_pid = pg_backend_pid() + 1 WHERE instance_id = (SELECT id FROM inst);
SET LOCAL ROLE broker_runtime;
SELECT throws_ok($$SELECT broker.broker_shutdown_instance((SELECT id FROM inst))$$, '55000', NULL,
                 'shutting down the instance of another session: 55000');
RESET ROLE;
SELECT is((SELECT status FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM inst)), 'active',
          'it stays active');
UPDATE broker.broker_queueinstance SET backend_pid = pg_backend_pid() WHERE instance_id = (SELECT id FROM inst);
SELECT is(broker.broker_shutdown_instance((SELECT id FROM inst)), true, 'from its own session it stops');
SELECT is(broker.broker_shutdown_instance((SELECT id FROM inst)), false, 'a stopped instance: false, as before');

SELECT * FROM finish();
ROLLBACK;
