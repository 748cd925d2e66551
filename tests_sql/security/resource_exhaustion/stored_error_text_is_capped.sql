-- A failing job's error message is stored, and returned by broker_run / broker_run_batch, as at
-- most 2,000 characters, a longer one cut and ending in a marker giving its full length
-- (broker._error_text): 20 jobs failing with 16 MB messages cannot fill the table, the runner
-- or its dashboard.
BEGIN;
SELECT plan(10);
\ir ../../lib/run_next.psql

SELECT is(broker._error_text(repeat('e', 2000)), repeat('e', 2000), 'a 2,000-character message is kept whole');
SELECT ok(broker._error_text(repeat('e', 2001)) = repeat('e', 2000 - length(' [truncated from 2001 characters]')) || ' [truncated from 2001 characters]',
    'a longer one is cut to 2,000 characters with the marker');
SELECT is(broker._error_text(broker._error_text(repeat('e', 5000))), broker._error_text(repeat('e', 5000)),
    'capping twice changes nothing');
SELECT is(broker._error_text(NULL), NULL, 'NULL stays NULL');

-- a job that raises a 1 MB message, retried once: each attempt's stored message is capped
CREATE TEMP TABLE big AS SELECT job_id FROM broker.broker_add_job('huge error',
    $$BEGIN RAISE EXCEPTION '%', repeat('x', 1000000); END$$, p_job_language => 'plpgsql', p_max_attempts => 2);
CREATE TEMP TABLE c1 AS SELECT * FROM broker.broker_get(1);
CREATE TEMP TABLE r1 AS SELECT * FROM broker.broker_run((SELECT job_id FROM c1), (SELECT lease_token FROM c1));
SELECT ok((SELECT error_message FROM r1) = repeat('x', 2000 - length(' [truncated from 1000000 characters]')) || ' [truncated from 1000000 characters]',
    'broker_run returns the capped message');
SELECT ok((SELECT last_error_message FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM big)) =
    repeat('x', 2000 - length(' [truncated from 1000000 characters]')) || ' [truncated from 1000000 characters]', 'the retried attempt stored the capped message');

UPDATE broker.broker_jobs SET run_after = now() WHERE job_id = (SELECT job_id FROM big);
CREATE TEMP TABLE c2 AS SELECT * FROM broker.broker_get(1);
CREATE TEMP TABLE r2 AS SELECT * FROM broker.broker_run_batch(ARRAY[(SELECT job_id FROM c2)], ARRAY[(SELECT lease_token FROM c2)]);
SELECT results_eq($$SELECT complete_status, length(error_message) FROM r2$$,
    $$VALUES (3::smallint, 2000)$$,
    'broker_run_batch returns the capped message of the failed job');
SELECT is((SELECT length(last_error_message) FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM big)),
    2000, 'the failed job stored the capped message');

-- short messages are stored as they are
CREATE TEMP TABLE small AS SELECT job_id FROM broker.broker_add_job('short error', 'SELECT 1/0');
SELECT is(pg_temp.run_next(), 'short error', 'a job with a short error ran');
SELECT is((SELECT last_error_message FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM small)),
    'division by zero', 'short messages are stored unchanged');

SELECT * FROM finish();
ROLLBACK;
