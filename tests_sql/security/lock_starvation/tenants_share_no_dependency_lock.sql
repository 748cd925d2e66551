-- One tenant's enqueues never hold a dependency lock that another tenant's enqueues or
-- completions need: the keys carry the tenant, so a tenant that picks its group names to
-- hit the keys of another tenant's groups (names found offline, as an attacker would, by
-- hashing into the 1,024 buckets that every tenant shared) still holds none of them.
BEGIN;
SELECT plan(6);

-- the advisory locks this session holds, as "classid:objid:objsubid" (a set)
CREATE FUNCTION pg_temp.held_keys() RETURNS text[] LANGUAGE sql AS $f$
    SELECT coalesce(array_agg(DISTINCT l.classid || ':' || l.objid || ':' || l.objsubid), '{}')
      FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
$f$;

-- tenant_b's work, measured on its own: members of group etl, a job of etl completing,
-- a report that waits on the group and one that waits on a member by id
SAVEPOINT b_work;
SELECT broker.broker_set_tenant('tenant_b');
SELECT broker.broker_add_job('b member', 'SELECT 1', 1, p_job_group => 'etl');
SELECT broker.broker_add_job('b report', 'SELECT 1', 2, p_depends_on_groups => ARRAY['etl']);
SELECT broker.broker_add_job('b by id', 'SELECT 1', 2,
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM broker.broker_jobs WHERE job_name = 'b member')]);
SELECT count(*) FROM broker.broker_get(1) AS g, LATERAL broker.broker_run(g.job_id) AS r;
SELECT pg_temp.held_keys() AS b_keys \gset
ROLLBACK TO SAVEPOINT b_work;
SELECT is(pg_temp.held_keys(), '{}'::text[], 'nothing held once tenant_b''s work is rolled back');

-- tenant_a's attack: group names whose shared bucket was etl's bucket of tenant_b
SAVEPOINT a_work;
SELECT broker.broker_set_tenant('tenant_a');
SELECT array_agg(n) AS a_groups
  FROM (SELECT 'g' || i AS n FROM generate_series(1, 100000) AS i
         WHERE hashtext('tenant_a' || E'\x1f' || 'g' || i) & 1023 = hashtext('tenant_b' || E'\x1f' || 'etl') & 1023
            OR hashtext('tenant_a' || E'\x1f' || 'g' || i) & 1023 = hashtext('tenant_b' || E'\x1f' || 'b report') & 1023
         LIMIT 20) AS x \gset
SELECT broker.broker_add_job('a member', 'SELECT 1', 1, p_job_group => 'g1');
SELECT broker.broker_add_job('a hog', 'SELECT 1', 2, p_depends_on_groups => :'a_groups'::text[],
    p_depends_on_job_ids => ARRAY[(SELECT job_id FROM broker.broker_jobs WHERE job_name = 'a member')]);
SELECT pg_temp.held_keys() AS a_keys \gset
ROLLBACK TO SAVEPOINT a_work;

SELECT cmp_ok(cardinality(:'b_keys'::text[]), '>=', 3, 'tenant_b''s work takes dependency locks');
SELECT cmp_ok(cardinality(:'a_keys'::text[]), '>=', 3, 'tenant_a''s enqueue takes dependency locks');
SELECT is(ARRAY(SELECT unnest(:'a_keys'::text[]) INTERSECT SELECT unnest(:'b_keys'::text[])), '{}'::text[],
          'none of tenant_a''s locks is one that tenant_b''s work takes');

-- nor can an enqueuer take another tenant's locks by calling the lock function itself
CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('tenant_a', 'broker_test_mallory');
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('tenant_a');
SELECT throws_ok($$SELECT broker._lock_dependency_keys('tenant_b', NULL, ARRAY['etl'], NULL, NULL)$$, '42501', NULL,
                 'an enqueuer cannot lock the keys of a tenant it may not act for');
SELECT lives_ok($$SELECT broker._lock_dependency_keys('tenant_a', NULL, ARRAY['etl'], NULL, NULL)$$,
                'its own tenant''s, it may');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
