-- Dependencies by group (fan-in): wait for every unfinished job of the group.
BEGIN;
SELECT plan(11);
\ir ../lib/run_next.psql

-- three parallel extracts fan into one transform, which feeds a load
SELECT broker.broker_add_job('extract ' || i, 'SELECT 1', p_job_group => 'extract') FROM generate_series(1, 3) AS i;
SELECT broker.broker_add_job_simple('transform', 'SELECT 1', 10, ARRAY['extract']);
SELECT broker.broker_add_job_simple('load', 'SELECT 1', 20, ARRAY['transform']);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'transform'), 3, 'transform waits on 3 extracts');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'load'), 1, 'load waits on transform');
SELECT is(pg_temp.run_next(), 'extract 1', 'extracts first despite lower priority');
SELECT is(pg_temp.run_next(), 'extract 2', 'extract 2');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'transform'), 1, 'one extract left');

-- a member that joins the group while the dependent is still pending is waited for too
SELECT broker.broker_add_job('extract late', 'SELECT 1', p_job_group => 'extract');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'transform'), 2, 'a late member adds to the wait');
SELECT is(ARRAY[pg_temp.run_next(), pg_temp.run_next(), pg_temp.run_next(), pg_temp.run_next(), pg_temp.run_next()],
          ARRAY['extract 3', 'extract late', 'transform', 'load', NULL], 'fan-in order: all extracts, transform, load');

-- completed members drop out: a new dependent of a finished group is ready at once
SELECT broker.broker_add_job_simple('report', 'SELECT 1', 0, ARRAY['extract']);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'report'), 0, 'finished groups do not block');
SELECT is(pg_temp.run_next(), 'report', 'report runs');

-- depending on a group nobody is in yet does not block (nothing unfinished to wait for)
SELECT broker.broker_add_job_simple('orphan', 'SELECT 1', 0, ARRAY['nobody']);
SELECT is(pg_temp.run_next(), 'orphan', 'an empty group does not block');

-- id and group edges together
SELECT broker.broker_add_job('m1', 'SELECT 1', 3, p_job_group => 'gm');
CREATE TEMP TABLE m2 AS SELECT job_id FROM broker.broker_add_job('m2', 'SELECT 1', 3);
SELECT broker.broker_add_job('both', 'SELECT 1', 3, 100, p_depends_on_job_ids => ARRAY[(SELECT job_id FROM m2)],
                             p_depends_on_groups => ARRAY['gm']);
SELECT is(ARRAY[pg_temp.run_next(3), pg_temp.run_next(3), pg_temp.run_next(3)], ARRAY['m1', 'm2', 'both'],
          'a job with id and group dependencies waits for both');

SELECT * FROM finish();
ROLLBACK;
