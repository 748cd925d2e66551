-- Dependencies by job id: gated until the target completes.
BEGIN;
SELECT plan(10);
\ir ../lib/run_next.psql

CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('a', 'SELECT 1');
CREATE TEMP TABLE b AS SELECT job_id FROM broker.broker_add_job('b', 'SELECT 1', 1, 100,
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM a)]);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM b)), 1, 'b waits on one job');
SELECT is(pg_temp.run_next(), 'a', 'a runs first although b has the higher priority');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM b)), 0, 'a completed: b released');
SELECT is(pg_temp.run_next(), 'b', 'then b');

-- depending on an already completed job: ready at once
CREATE TEMP TABLE c AS SELECT job_id FROM broker.broker_add_job('c', 'SELECT 1',
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM a)]);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 0,
          'a completed dependency does not block');
SELECT is(pg_temp.run_next(), 'c', 'and c runs');

-- a running target still blocks
CREATE TEMP TABLE d AS SELECT job_id FROM broker.broker_add_job('d', 'SELECT 1');
CREATE TEMP TABLE d_claim AS SELECT * FROM broker.broker_get(1);
CREATE TEMP TABLE e AS SELECT job_id FROM broker.broker_add_job('e', 'SELECT 1',
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM d)]);
SELECT is((SELECT count(*) FROM broker.broker_get(1)), 0::bigint, 'e waits while d is running');
SELECT broker.broker_run((SELECT job_id FROM d_claim));
SELECT is(pg_temp.run_next(), 'e', 'e runs once d completes');

-- a failed target can never complete: refused
CREATE TEMP TABLE f AS SELECT job_id FROM broker.broker_add_job('f', 'SELECT 1/0');
SELECT pg_temp.run_next();
SELECT throws_ok(format($$SELECT broker.broker_add_job('g', 'SELECT 1', p_depends_on_job_ids => ARRAY[%s]::bigint[])$$,
                        (SELECT job_id FROM f)),
    '55000', NULL, 'depending on a failed job: 55000');

-- several ids: waits for all
CREATE TEMP TABLE h1 AS SELECT job_id FROM broker.broker_add_job('h1', 'SELECT 1', 2);
CREATE TEMP TABLE h2 AS SELECT job_id FROM broker.broker_add_job('h2', 'SELECT 1', 2);
CREATE TEMP TABLE h3 AS SELECT job_id FROM broker.broker_add_job('h3', 'SELECT 1', 2,
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM h1), (SELECT job_id FROM h2)]);
SELECT is(ARRAY[pg_temp.run_next(2), pg_temp.run_next(2), pg_temp.run_next(2), pg_temp.run_next(2)],
          ARRAY['h1', 'h2', 'h3', NULL], 'a job with two id dependencies runs after both');

SELECT * FROM finish();
ROLLBACK;
