-- A job waits on at most 100 groups (22023 beyond), however its edges are written: each
-- group is a lock its enqueue takes, and a count its tenant's completions keep exact.
BEGIN;
SELECT plan(7);

SELECT lives_ok($$SELECT broker.broker_add_job('hundred', 'SELECT 1',
                     p_depends_on_groups => (SELECT array_agg('g' || i) FROM generate_series(1, 100) AS i))$$,
                'a job may wait on 100 groups');
SELECT throws_ok($$SELECT broker.broker_add_job('too many', 'SELECT 1',
                      p_depends_on_groups => (SELECT array_agg('g' || i) FROM generate_series(1, 101) AS i))$$,
                 '22023', 'broker_add_job: p_depends_on_groups may name at most 100 groups, got 101',
                 'broker_add_job refuses a 101st group');
SELECT throws_ok($$SELECT broker.broker_add_jobs(jsonb_build_array(
                      jsonb_build_object('job_name', 'ok', 'execute_str', 'SELECT 1'),
                      jsonb_build_object('job_name', 'too many', 'execute_str', 'SELECT 1',
                                         'depends_on_groups', (SELECT jsonb_agg('g' || i) FROM generate_series(1, 101) AS i))))$$,
                 '22023', 'broker_add_jobs: element 2: depends_on_groups may name at most 100 groups, got 101',
                 'broker_add_jobs refuses it, naming the element');

-- raw edges, as a broker_enqueue member may write them
SELECT broker.broker_add_job('raw', 'SELECT 1');
SELECT lives_ok($$INSERT INTO broker.broker_job_dependency (job_id, depends_on_group)
                  SELECT (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'raw'), 'r' || i
                    FROM generate_series(1, 100) AS i$$, '100 raw group edges are accepted');
SELECT throws_ok($$INSERT INTO broker.broker_job_dependency (job_id, depends_on_group)
                   VALUES ((SELECT job_id FROM broker.broker_jobs WHERE job_name = 'raw'), 'r101')$$,
                 '22023', NULL, 'a 101st, in a later statement, is refused');
SELECT is((SELECT count(*) FROM broker.broker_job_dependency AS e JOIN broker.broker_jobs AS j USING (job_id)
            WHERE j.job_name = 'raw'), 100::bigint, 'and not written');
SELECT lives_ok($$INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id)
                  VALUES ((SELECT job_id FROM broker.broker_jobs WHERE job_name = 'raw'),
                          (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'hundred'))$$,
                'id edges do not count against the group limit');

SELECT * FROM finish();
ROLLBACK;
