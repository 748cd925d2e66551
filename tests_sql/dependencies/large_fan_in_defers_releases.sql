-- Large fan-in: completing a job that more than 500 pending jobs wait on releases the first
-- 500 (by id) at once and defers the rest to broker_deferred_release, which
-- broker_apply_deferred_releases (the runner's maintenance) applies, never a claim; the
-- counters end exact whatever happens in between.
BEGIN;
SELECT plan(17);
\ir ../lib/run_next.psql

-- the member (queue 1) and 2,500 dependents of its group (queue 9)
SELECT broker.broker_add_job('member', 'SELECT 1', 1, p_job_group => 'big');
CREATE TEMP TABLE deps AS
SELECT a.job_id FROM broker.broker_add_jobs((
    SELECT jsonb_agg(jsonb_build_object('job_name', 'dep ' || i, 'execute_str', 'SELECT 1', 'job_queue', 9,
                                        'depends_on_groups', CASE WHEN i = 2500 THEN '["big", "other"]'::jsonb
                                                                  ELSE '["big"]'::jsonb END))
      FROM generate_series(1, 2500) AS i)) AS a;
-- a second, unfinished group that only the last dependent also waits on
SELECT broker.broker_add_job('other member', 'SELECT 1', 2, p_job_group => 'other');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 9 AND pending_deps >= 1), 2500::bigint,
          'all 2,500 dependents are blocked');

SELECT is(pg_temp.run_next(1), 'member', 'the member runs');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 9 AND pending_deps = 0), 500::bigint,
          'its completion released 500 dependents at once');
SELECT is((SELECT max(job_id) FROM broker.broker_jobs WHERE job_queue = 9 AND pending_deps = 0),
          (SELECT job_id FROM deps ORDER BY job_id OFFSET 499 LIMIT 1), 'the 500 with the lowest ids');
SELECT is((SELECT cardinality(job_ids) FROM broker.broker_deferred_release), 2000, 'the other 2,000 are deferred');
SELECT ok((SELECT job_ids = (SELECT array_agg(job_id ORDER BY job_id) FROM deps OFFSET 0)[501:]
             FROM broker.broker_deferred_release), 'deferred in id order');

-- a job that starts to wait on the group now does not count the finished member
SELECT broker.broker_add_job('late', 'SELECT 1', 9, p_depends_on_groups => ARRAY['big']);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'late'), 0, 'a later dependent is not blocked');
-- a deferred dependent cancelled before its release is skipped
SELECT broker.broker_cancel_job((SELECT max(job_id) - 1 FROM deps), 'changed my mind');

-- a claim does no release work; the runner's maintenance applies them, 500 here
SELECT is((SELECT count(*) FROM broker.broker_get(8)), 0::bigint, 'nothing to claim on queue 8');
SELECT is(broker.broker_apply_deferred_releases(500), 500, 'broker_apply_deferred_releases(500) applies 500');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 9 AND pending_deps = 0 AND complete_status = 0),
          1001::bigint, 'it released 500 more (and the late job)');
SELECT is((SELECT cardinality(job_ids) FROM broker.broker_deferred_release), 1500, '1,500 still deferred');
SELECT is(broker.broker_apply_deferred_releases(500) + broker.broker_apply_deferred_releases(500)
          + broker.broker_apply_deferred_releases(500), 1500, 'three more calls apply the rest');
SELECT is((SELECT count(*) FROM broker.broker_deferred_release), 0::bigint, 'nothing deferred any more');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_queue = 9 AND pending_deps = 0 AND complete_status = 0),
          2499::bigint, 'every dependent waiting only on the member is ready');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT max(job_id) FROM deps)), 1,
          'one waiting on an unfinished group too still waits on it');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT max(job_id) - 1 FROM deps)), 4::smallint,
          'the cancelled one stays cancelled');

-- the released dependents run
SELECT is((SELECT count(*) FROM broker.broker_get(9, NULL, 60, 50)), 50::bigint, 'released dependents are claimable');

SELECT * FROM finish();
ROLLBACK;
