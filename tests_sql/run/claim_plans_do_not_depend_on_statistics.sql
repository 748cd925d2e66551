-- The claim's plans do not depend on statistics: on a table that was never analyzed
-- (or was analyzed when it was empty), with thousands of ready jobs, neither the probe
-- nor the claim is a hash join or a sequential scan over broker_jobs, and a claim of a few
-- jobs reads a few index entries, not every ready job. (Counted, not timed.)
BEGIN;
SELECT plan(11);

\ir ../lib/claim_plan.psql

CREATE FUNCTION pg_temp.forget_statistics() RETURNS void LANGUAGE sql AS $f$
    DELETE FROM pg_statistic WHERE starelid = 'broker.broker_jobs'::regclass;
    UPDATE pg_class SET reltuples = -1, relpages = 0, relallvisible = 0
     WHERE oid IN (SELECT 'broker.broker_jobs'::regclass
                   UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = 'broker.broker_jobs'::regclass);
$f$;

-- A session keeps the plans of its first claim: made on a table of a few rows, they are
-- still index scans (a sequential scan there would be kept while the table grows).
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('few', 'few', 'SELECT 1');
SELECT is((SELECT array_agg(x.node) FROM (SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('priority-probe'))
                                            UNION ALL SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-range'))
                                            UNION ALL SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-new'))
                                            UNION ALL SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-query'))
                                            UNION ALL SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-lock'))
                                            UNION ALL SELECT node FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-tenants'))) AS x
            WHERE x.node = 'Seq Scan'), NULL, 'a table of a few rows: no sequential scan in the plans');
DELETE FROM broker.broker_jobs;

-- "Analyzed" when it held nothing: the statistics say the table is empty.
ANALYZE broker.broker_jobs;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_priority)
SELECT 'ready', 'ready', 'SELECT 1', i % 3 FROM generate_series(1, 6000) AS i;
CREATE TEMP VIEW claim_nodes AS
SELECT 'probe' AS stmt, * FROM pg_temp.plan_nodes(pg_temp.plan_of('priority-probe'))
UNION ALL
SELECT 'claim', * FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-range'))
UNION ALL
SELECT 'new', * FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-new'))
UNION ALL
SELECT 'update', * FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-query'))
UNION ALL
SELECT 'lock', * FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-lock'))
UNION ALL
SELECT 'tenants', * FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-tenants'));
SELECT is((SELECT array_agg(node || ' ' || COALESCE(relation, '')) FROM claim_nodes
            WHERE node ~ 'Hash|Seq Scan|Join|Nested Loop'
               OR (relation = 'broker_jobs' AND node !~ 'Index|ModifyTable' AND (stmt, node) <> ('lock', 'Tid Scan'))),
          NULL, 'stale statistics: no hash, join or sequential scan, every read of broker_jobs by index (the lock by tid)');

SELECT pg_temp.forget_statistics();
SELECT is((SELECT reltuples FROM pg_class WHERE oid = 'broker.broker_jobs'::regclass), -1::real,
          'broker_jobs now has no statistics');
SELECT is((SELECT array_agg(node || ' ' || COALESCE(relation, '')) FROM claim_nodes WHERE node ~ 'Hash|Join|Nested Loop'),
          NULL, 'no statistics: no hash node and no join');
SELECT is((SELECT array_agg(stmt) FROM claim_nodes WHERE node = 'Seq Scan'), NULL, 'no statistics: no sequential scan');
SELECT is((SELECT array_agg(DISTINCT index_name ORDER BY index_name) FROM claim_nodes WHERE stmt = 'probe' AND index_name IS NOT NULL),
          ARRAY['broker_jobs_claim_idx', 'broker_jobs_ready_xid_idx']::text[],
          'no statistics: the probe descends the claim index and reads the newly ready ones by ready_xid');
SELECT is((SELECT array_agg(DISTINCT index_name ORDER BY index_name) FROM claim_nodes WHERE stmt = 'new' AND index_name IS NOT NULL),
          ARRAY['broker_jobs_ready_xid_idx']::text[], 'no statistics: the newly ready ones are claimed by ready_xid');
SELECT ok(EXISTS (SELECT FROM claim_nodes WHERE stmt = 'claim' AND index_name = 'broker_jobs_claim_idx'),
          'no statistics: the claim reads the claim index');

-- And the function as it runs on the unanalyzed table (from the start of the claim index: no
-- hint, see tests_py/integration/test_claims_start_at_the_queue_hint.py): a claim of 4 reads a handful of
-- rows through indexes (the hash semi-join read all 6,000 ready jobs).
DELETE FROM broker.broker_claim_hint;
CREATE TEMP TABLE before AS
SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass;
CREATE TEMP TABLE claimed AS SELECT job_id, job_priority FROM broker.broker_get(1, NULL, 60, 4);
SELECT is((SELECT count(*)::integer FROM claimed WHERE job_priority = 2), 4, 'it claimed 4 jobs of the highest level');
SELECT is((SELECT s.seq_scan - b.seq_scan FROM pg_stat_xact_user_tables AS s, before AS b
            WHERE s.relid = 'broker.broker_jobs'::regclass), 0::bigint, 'no sequential scan of broker_jobs');
SELECT cmp_ok((SELECT s.idx_tup_fetch - b.idx_tup_fetch FROM pg_stat_xact_user_tables AS s, before AS b
                WHERE s.relid = 'broker.broker_jobs'::regclass), '<=', 50::bigint,
              'the claim fetched at most 50 rows through indexes for 4 jobs');

SELECT * FROM finish();
ROLLBACK;
