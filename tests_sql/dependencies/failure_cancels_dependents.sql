-- A job that ends failed or cancelled cancels everything that waits on it, transitively.
BEGIN;
SELECT plan(9);

SELECT broker.broker_add_job('extract ' || i, CASE i WHEN 2 THEN 'SELECT 1/0' ELSE 'SELECT 1' END,
                             p_job_group => 'extract') FROM generate_series(1, 3) AS i;
CREATE TEMP TABLE t AS SELECT job_id FROM broker.broker_add_job_simple('transform', 'SELECT 1', 0, ARRAY['extract']);
SELECT broker.broker_add_job_simple('load', 'SELECT 1', 0, ARRAY['transform']);
CREATE TEMP TABLE audit AS SELECT job_id FROM broker.broker_add_job('audit', 'SELECT 1',
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM t)]);
SELECT broker.broker_add_job('unrelated', 'SELECT 1', 2);

-- run the extracts: number 2 fails
SELECT broker.broker_run(g.job_id) FROM broker.broker_get(1, NULL, 60, 3) AS g;
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'extract 2'), 3::smallint, 'extract 2 failed');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'transform'), 4::smallint,
          'its group dependent is cancelled');
SELECT ok((SELECT cancel_reason ~ '^dependency job \d+ \(extract 2\) failed$' FROM broker.broker_jobs WHERE job_name = 'transform'),
          'the reason names the failed job');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'load'), 4::smallint,
          'transitively: the dependent of the dependent is cancelled');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'audit'), 4::smallint,
          'id dependents are cancelled too');
SELECT is((SELECT cancel_reason FROM broker.broker_jobs WHERE job_name = 'load'),
          (SELECT cancel_reason FROM broker.broker_jobs WHERE job_name = 'transform'), 'every victim names the root cause');
SELECT ok((SELECT every(finished_at IS NOT NULL) FROM broker.broker_jobs WHERE complete_status = 4), 'cancelled jobs are finished');
SELECT is((SELECT array_agg(complete_status ORDER BY job_name) FROM broker.broker_jobs
            WHERE job_name IN ('extract 1', 'extract 3', 'unrelated')), ARRAY[2, 2, 0]::smallint[],
          'siblings and unrelated jobs are untouched');
SELECT is((SELECT count(*) FROM broker.broker_get(1)), 0::bigint, 'nothing is left waiting silently');

SELECT * FROM finish();
ROLLBACK;
