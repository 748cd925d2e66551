-- A chain of 1,000 jobs enqueues in one broker_add_jobs call, and in calls of 100 that each
-- wait on the previous call's last job; closing such a chain, by id or by group, is still a cycle
-- (23514); the cap counts distinct jobs, not paths (a lattice of fan-ins and fan-outs with
-- 5^20 paths through 100 jobs passes); past the cap 54000, past the edge bound 54001.
BEGIN;
SELECT plan(14);

-- one call: a<i> in group A<i> waits on group A<i-1>
CREATE TEMP TABLE one_call AS
SELECT a.ord, a.job_id FROM broker.broker_add_jobs((
    SELECT jsonb_agg(jsonb_build_object('job_name', 'a' || i, 'execute_str', 'SELECT 1', 'job_group', 'A' || i)
                     || CASE WHEN i > 1 THEN jsonb_build_object('depends_on_groups', jsonb_build_array('A' || (i - 1)))
                             ELSE '{}'::jsonb END ORDER BY i)
      FROM generate_series(1, 1000) AS i)) AS a;
SELECT is((SELECT count(*) FROM one_call), 1000::bigint, 'a 1,000-job chain enqueues in one call');
SELECT is((SELECT count(*) FROM broker.broker_jobs AS j JOIN one_call AS c USING (job_id)
            WHERE j.pending_deps = CASE WHEN c.ord = 1 THEN 0 ELSE 1 END), 1000::bigint,
          'each of its jobs waits on the one before');

-- calls of 100: b<i> in group B<i>; the first job of a call waits on the last of the previous call by id
CREATE FUNCTION pg_temp.chain_in_calls() RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
    v_last bigint;
    v_n    bigint := 0;
BEGIN
    FOR k IN 0 .. 9 LOOP
        SELECT max(a.job_id), v_n + count(*) INTO v_last, v_n
          FROM broker.broker_add_jobs((
              SELECT jsonb_agg(jsonb_build_object('job_name', 'b' || i, 'execute_str', 'SELECT 1', 'job_group', 'B' || i)
                               || CASE WHEN i = k * 100 + 1 AND v_last IS NOT NULL
                                            THEN jsonb_build_object('depends_on_job_ids', jsonb_build_array(v_last))
                                       WHEN i > k * 100 + 1 THEN jsonb_build_object('depends_on_groups', jsonb_build_array('B' || (i - 1)))
                                       ELSE '{}'::jsonb END ORDER BY i)
                FROM generate_series(k * 100 + 1, k * 100 + 100) AS i)) AS a;
    END LOOP;
    RETURN v_n;
END $f$;
SELECT is(pg_temp.chain_in_calls(), 1000::bigint, 'a 1,000-job chain enqueues in ten calls of 100');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name LIKE 'b%' AND pending_deps = 1), 999::bigint,
          'each of its jobs but the first waits on the one before, across the calls');

-- closing the chains: a new member of the first job's group waiting on the last job
SELECT throws_ok(format($$SELECT broker.broker_add_job('a1 again', 'SELECT 1', p_job_group => 'A1',
                          p_depends_on_job_ids => ARRAY[%s]::bigint[])$$, (SELECT job_id FROM one_call WHERE ord = 1000)),
                 '23514', NULL, 'closing the 1,000-job chain by an id edge: 23514');
SELECT throws_ok($$SELECT broker.broker_add_job('a1 again', 'SELECT 1', p_job_group => 'A1', p_depends_on_groups => ARRAY['A1000'])$$,
                 '23514', NULL, 'closing it by a group edge: 23514');
SELECT throws_ok($$SELECT broker.broker_add_job('b1 again', 'SELECT 1', p_job_group => 'B1', p_depends_on_groups => ARRAY['B1000'])$$,
                 '23514', NULL, 'closing the chain made in ten calls: 23514');
SELECT throws_like($$SELECT broker.broker_add_job('b1 again', 'SELECT 1', p_job_group => 'B1', p_depends_on_groups => ARRAY['B1000'])$$,
                   '%dependency cycle%b2%B1%', 'the message names the job that waits on the closing job''s group');
-- a cycle within one call, through a group and an id of an existing job
SELECT broker.broker_add_job('c0', 'SELECT 1', p_job_group => 'C0', p_depends_on_groups => ARRAY['C2']);
SELECT throws_ok(format($$SELECT * FROM broker.broker_add_jobs('[
                     {"job_name": "c1", "execute_str": "SELECT 1", "job_group": "C1", "depends_on_job_ids": [%s]},
                     {"job_name": "c2", "execute_str": "SELECT 1", "job_group": "C2", "depends_on_groups": ["C1"]}]')$$,
                        (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'c0')),
                 '23514', NULL, 'a cycle through one call''s jobs and an existing job: 23514');

-- a lattice: 20 layers of 5 jobs, each job waiting on the layer before (5^20 paths, 100 jobs)
SELECT is((SELECT count(*) FROM broker.broker_add_jobs((
              SELECT jsonb_agg(jsonb_build_object('job_name', 'd' || l || '.' || k, 'execute_str', 'SELECT 1', 'job_group', 'D' || l)
                               || CASE WHEN l > 1 THEN jsonb_build_object('depends_on_groups', jsonb_build_array('D' || (l - 1)))
                                       ELSE '{}'::jsonb END ORDER BY l, k)
                FROM generate_series(1, 20) AS l, generate_series(1, 5) AS k))), 100::bigint,
          'a lattice of fan-ins and fan-outs enqueues in one call');
CREATE TEMP TABLE first_layer AS SELECT array_agg(job_id) AS ids FROM broker.broker_jobs WHERE job_group = 'D1';
SELECT is((SELECT count(*) FROM broker._dependency_cycle((SELECT ids FROM first_layer), 100)), 0::bigint,
          'the cap counts its 100 distinct jobs, not its paths');
SELECT throws_ok($$SELECT * FROM broker._dependency_cycle((SELECT ids FROM first_layer), 99)$$,
                 '54000', NULL, 'one job past the cap: 54000');
SELECT throws_like($$SELECT * FROM broker._dependency_cycle((SELECT ids FROM first_layer), 99)$$,
                   '%more than 99 pending jobs wait%', 'the message says how many jobs it counted');
-- the graph between them has 5 * 19 job-to-group edges and 5 * 20 group-to-member edges
SELECT throws_ok($$SELECT * FROM broker._dependency_cycle((SELECT ids FROM first_layer), 100, 194)$$,
                 '54001', NULL, 'past the bound on its edges: 54001');

SELECT * FROM finish();
ROLLBACK;
