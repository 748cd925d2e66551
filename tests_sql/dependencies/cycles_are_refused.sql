-- Cycle checks of any length across id and group edges.
BEGIN;
SELECT plan(8);

-- 1 hop: A waits on group B; a job of group B that waits on group A closes the loop.
SELECT broker.broker_add_job('a1', 'SELECT 1', p_job_group => 'A', p_depends_on_groups => ARRAY['B']);
SELECT throws_ok($$SELECT broker.broker_add_job('b1', 'SELECT 1', p_job_group => 'B', p_depends_on_groups => ARRAY['A'])$$,
    '23514', NULL, '1-hop group cycle: 23514');

-- 1 hop via an id edge: x waits on group X; a job of group X waiting on job x.
CREATE TEMP TABLE x AS SELECT job_id FROM broker.broker_add_job('x', 'SELECT 1', p_job_group => 'X1',
    p_depends_on_groups => ARRAY['X']);
SELECT throws_ok(format($$SELECT broker.broker_add_job('x2', 'SELECT 1', p_job_group => 'X',
    p_depends_on_job_ids => ARRAY[%s]::bigint[])$$, (SELECT job_id FROM x)),
    '23514', NULL, '1-hop id/group cycle: 23514');

-- A chain c1 -> C4, c2 -> C1, c3 -> C2; a job of group C4 waiting on c3 (by id) closes a 4-job loop.
SELECT broker.broker_add_job('c1', 'SELECT 1', p_job_group => 'C1', p_depends_on_groups => ARRAY['C4']);
SELECT broker.broker_add_job('c2', 'SELECT 1', p_job_group => 'C2', p_depends_on_groups => ARRAY['C1']);
CREATE TEMP TABLE c3 AS SELECT job_id FROM broker.broker_add_job('c3', 'SELECT 1', p_job_group => 'C3',
    p_depends_on_groups => ARRAY['C2']);
SELECT throws_ok(format($$SELECT broker.broker_add_job('c4', 'SELECT 1', p_job_group => 'C4',
    p_depends_on_job_ids => ARRAY[%s]::bigint[])$$, (SELECT job_id FROM c3)),
    '23514', NULL, '4-job cycle across group and id edges: 23514');
SELECT throws_like(format($$SELECT broker.broker_add_job('c4', 'SELECT 1', p_job_group => 'C4',
    p_depends_on_job_ids => ARRAY[%s]::bigint[])$$, (SELECT job_id FROM c3)),
    '%dependency cycle%c1%C4%', 'the message names the waiting job and the group');
SELECT lives_ok($$SELECT broker.broker_add_job('c4', 'SELECT 1', p_job_group => 'C4')$$,
    'joining C4 without the closing edge is fine');

-- a long chain (50 groups) closed at the end
SELECT broker.broker_add_job('l' || i, 'SELECT 1', p_job_group => 'L' || i, p_depends_on_groups => ARRAY['L' || (i - 1)])
  FROM generate_series(1, 50) AS i;
SELECT throws_ok($$SELECT broker.broker_add_job('l0', 'SELECT 1', p_job_group => 'L0', p_depends_on_groups => ARRAY['L50'])$$,
    '23514', NULL, '51-hop cycle: 23514');

-- a diamond is not a cycle
SELECT broker.broker_add_job('d1', 'SELECT 1', p_job_group => 'D1');
SELECT broker.broker_add_job('d2', 'SELECT 1', p_job_group => 'D2', p_depends_on_groups => ARRAY['D1']);
SELECT broker.broker_add_job('d3', 'SELECT 1', p_job_group => 'D3', p_depends_on_groups => ARRAY['D1']);
SELECT lives_ok($$SELECT broker.broker_add_job('d4', 'SELECT 1', p_job_group => 'D4', p_depends_on_groups => ARRAY['D2', 'D3'])$$,
    'a diamond is accepted');

-- finished jobs are not part of any cycle: once a1 ran, B may wait on A
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now() WHERE job_name = 'a1';
SELECT lives_ok($$SELECT broker.broker_add_job('b1', 'SELECT 1', p_job_group => 'B', p_depends_on_groups => ARRAY['A'])$$,
    'an edge from a finished job does not count');

SELECT * FROM finish();
ROLLBACK;
