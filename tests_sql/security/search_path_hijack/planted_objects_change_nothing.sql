-- Objects planted in a schema ahead of pg_catalog cannot change what the broker does.
BEGIN;
SELECT plan(11);

CREATE SCHEMA evil;
CREATE TABLE evil.calls (what text);
CREATE FUNCTION evil.log(p text) RETURNS boolean LANGUAGE sql AS $$ INSERT INTO evil.calls VALUES (p); SELECT true $$;
-- operators and functions the broker uses, shadowed with versions that lie and log
CREATE FUNCTION evil.int_eq(integer, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.log('int =') AND false $$;
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.int_eq);
CREATE FUNCTION evil.big_eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.log('bigint =') AND false $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.big_eq);
CREATE FUNCTION evil.text_eq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.log('text =') AND true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.btrim(text) RETURNS text LANGUAGE sql AS $$ SELECT CASE WHEN evil.log('btrim') THEN 'x' END $$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT CASE WHEN evil.log('now') THEN 'infinity'::timestamptz END $$;
CREATE FUNCTION evil.current_setting(text, boolean) RETURNS text LANGUAGE sql AS $$ SELECT CASE WHEN evil.log('current_setting') THEN 'evil' END $$;
CREATE FUNCTION evil.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$ SELECT CASE WHEN evil.log('uuid') THEN '00000000-0000-0000-0000-000000000000'::uuid END $$;
CREATE FUNCTION evil.pg_notify(text, text) RETURNS void LANGUAGE sql AS $$ SELECT evil.log('notify') $$;

-- only the broker calls run under the hostile search_path; assertions run under the default one
SET LOCAL search_path = evil, pg_catalog, public;
CREATE TEMP TABLE sanity AS SELECT 1 = 1 AS one_is_one;
TRUNCATE evil.calls;
CREATE TEMP TABLE j AS SELECT * FROM broker.broker_add_job('hijack', 'SELECT 1', p_max_attempts => 2);
CREATE TEMP TABLE d AS SELECT * FROM broker.broker_add_job_simple('dependent', 'SELECT 1', 0, ARRAY['hijack']);
CREATE TEMP TABLE deps_before AS SELECT pending_deps FROM broker.broker_jobs WHERE job_id OPERATOR(pg_catalog.=) (SELECT job_id FROM d);
CREATE TEMP TABLE c AS SELECT * FROM broker.broker_get(1);
CREATE TEMP TABLE r AS SELECT * FROM broker.broker_run((SELECT job_id FROM c));
CREATE TEMP TABLE deps_after AS SELECT pending_deps FROM broker.broker_jobs WHERE job_id OPERATOR(pg_catalog.=) (SELECT job_id FROM d);
RESET search_path;

-- the same for a role under row-level security (policies, invoker functions, triggers)
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA evil TO broker_test_alice;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO broker_test_alice;
GRANT INSERT ON evil.calls TO broker_test_alice;
SET LOCAL ROLE broker_test_alice;
SET LOCAL search_path = evil, pg_catalog, public;
CREATE TEMP TABLE a1 AS SELECT * FROM broker.broker_add_job('alice 1', 'SELECT 1');
CREATE TEMP TABLE a2 AS SELECT * FROM broker.broker_add_job_simple('alice 2', 'SELECT 1', 0, ARRAY['alice 1']);
CREATE TEMP TABLE a_cancel AS SELECT broker.broker_cancel_job((SELECT job_id FROM a1)) AS n;
CREATE TEMP TABLE a_seen AS SELECT count(*) AS n FROM broker.broker_jobs;
RESET search_path;
RESET ROLE;

-- a batch: its jobs run in one call of the executor, where after a job that job's search_path is in force
SET LOCAL search_path = evil, pg_catalog, public;
CREATE TEMP TABLE bj AS SELECT * FROM broker.broker_add_jobs('[{"job_name": "b1", "execute_str": "SELECT 1", "job_queue": 7},
    {"job_name": "b2", "execute_str": "SELECT 1", "job_queue": 7}, {"job_name": "b3", "execute_str": "SELECT 1/0", "job_queue": 7},
    {"job_name": "b4", "execute_str": "BEGIN PERFORM 1; END", "job_queue": 7, "job_language": "plpgsql"}]');
RESET search_path;
CREATE TEMP TABLE bo AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT g.job_id FROM broker.broker_get(7, NULL, 60, 10) AS g ORDER BY g.job_id));
SELECT is((SELECT array_agg(ROW(j.job_search_path, o.complete_status)::text ORDER BY o.job_id)
             FROM bo AS o JOIN broker.broker_jobs AS j USING (job_id)),
          ARRAY['("evil, pg_catalog, public",2)', '("evil, pg_catalog, public",2)', '("evil, pg_catalog, public",3)',
                '("evil, pg_catalog, public",2)'],
          'a batch of jobs with the hostile search_path ran as usual');

SELECT is((SELECT n FROM a_cancel), 2, 'alice''s enqueue, dependency and cancel worked under the hostile search_path');
SELECT is((SELECT n FROM a_seen), 4::bigint, 'and her row-level security view is intact (tenant default: 4 jobs)');

SELECT is((SELECT one_is_one FROM sanity), false, 'the planted = operator is in force for unqualified SQL');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name IN ('hijack', 'dependent')), 2::bigint, 'both jobs enqueued normally');
SELECT is((SELECT pending_deps FROM deps_before), 1, 'the dependency was counted');
SELECT is((SELECT job_name FROM c), 'hijack', 'the claim picked the ready job');
SELECT isnt((SELECT lease_token FROM c), '00000000-0000-0000-0000-000000000000'::uuid, 'with a real lease token');
SELECT is((SELECT complete_status FROM r), 2::smallint, 'the job ran and completed');
SELECT is((SELECT pending_deps FROM deps_after), 0, 'and released its dependent');
SELECT is((SELECT array_agg(DISTINCT what) FROM evil.calls), NULL::text[],
          'no planted operator or function was ever called by the broker');

SELECT * FROM finish();
ROLLBACK;
