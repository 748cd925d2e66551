-- Session-level state a job sets (settings that end or slow the session, advisory locks,
-- LISTEN, prepared statements) is undone before broker_run / broker_run_batch return: the
-- caller's COMMIT and its idle time until its own reset never run with it.
BEGIN;
SELECT plan(10);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE TEMP TABLE before_run AS
SELECT name, current_setting(name) AS value FROM unnest(ARRAY['idle_session_timeout', 'idle_in_transaction_session_timeout',
       'statement_timeout', 'lock_timeout', 'application_name', 'tcp_user_timeout']) AS name;
GRANT SELECT ON before_run TO PUBLIC;

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('session settings', $$
    SELECT set_config('idle_session_timeout', '100', false), set_config('idle_in_transaction_session_timeout', '100', false),
           set_config('statement_timeout', '1', false), set_config('lock_timeout', '1', false),
           set_config('application_name', 'pgsql-broker:listen', false), set_config('tcp_user_timeout', '1', false)$$);
SELECT broker.broker_add_job('session locks', $$SELECT pg_advisory_lock(4242), pg_advisory_lock_shared(1, 2)$$);
SELECT broker.broker_add_job('prepared', $$PREPARE mallory_p AS SELECT 1$$);
RESET ROLE;

SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE outcome AS
SELECT g.job_name, r.complete_status FROM broker.broker_get(1, NULL, 60, 100) AS g,
       LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;

SELECT is((SELECT array_agg(complete_status) FROM outcome), ARRAY[2, 2, 2]::smallint[], 'the jobs ran');
SELECT results_eq($$SELECT name, current_setting(name) FROM before_run ORDER BY name$$,
                  $$SELECT name, value FROM before_run ORDER BY name$$,
                  'the session settings the job changed are back (broker_run)');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                   AND (objid, objsubid) IN ((4242, 1), (2, 2))), 0::bigint, 'its session advisory locks are released');
SELECT is((SELECT count(*) FROM pg_prepared_statements WHERE from_sql), 0::bigint, 'its prepared statement is gone');

-- the same through broker_run_batch
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('batch settings', $$SELECT set_config('idle_session_timeout', '100', false), set_config('statement_timeout', '1', false)$$);
SELECT broker.broker_add_job('batch mate', $$SELECT pg_advisory_lock(4343)$$);
RESET ROLE;
SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE claimed AS SELECT * FROM broker.broker_get(1, NULL, 60, 100);
CREATE TEMP TABLE batch AS
SELECT * FROM broker.broker_run_batch((SELECT array_agg(job_id ORDER BY job_id) FROM claimed),
                                      (SELECT array_agg(lease_token ORDER BY job_id) FROM claimed));
RESET ROLE;
SELECT is((SELECT array_agg(complete_status) FROM batch), ARRAY[2, 2]::smallint[], 'the batch ran');
SELECT results_eq($$SELECT name, current_setting(name) FROM before_run ORDER BY name$$,
                  $$SELECT name, value FROM before_run ORDER BY name$$,
                  'the session settings are back (broker_run_batch)');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                   AND (objid, objsubid) = (4343, 1)), 0::bigint, 'the batch''s session advisory locks are released');

-- a caller that holds session advisory locks itself keeps them
SELECT pg_advisory_lock(77);
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_job('caller lock', $$SELECT set_config('lock_timeout', '5', false)$$);
RESET ROLE;
SET LOCAL ROLE broker_runtime;
SELECT is((SELECT r.complete_status FROM broker.broker_get(1, NULL, 60, 1) AS g,
                  LATERAL broker.broker_run(g.job_id, g.lease_token) AS r), 2::smallint, 'a job next to a caller''s lock ran');
RESET ROLE;
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND (objid, objsubid) = (77, 1)),
          1::bigint, 'the caller''s own session advisory lock is kept');
SELECT is(current_setting('lock_timeout'), (SELECT value FROM before_run WHERE name = 'lock_timeout'),
          'and the setting is back');
SELECT pg_advisory_unlock_all();

SELECT * FROM finish();
ROLLBACK;
