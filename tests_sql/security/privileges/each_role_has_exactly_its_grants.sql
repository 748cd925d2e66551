-- Table x role and function x role privilege matrix (sql/roles.sql is applied by make installcheck).
BEGIN;
SELECT plan(82);

CREATE ROLE broker_test_stranger LOGIN;
SELECT has_role('broker_admin');
SELECT has_role('broker_runtime');
SELECT has_role('broker_enqueue');
SELECT ok((SELECT NOT rolbypassrls AND NOT rolsuper FROM pg_roles WHERE rolname = 'broker_admin'),
          'broker_admin: no BYPASSRLS (its policies broker_admin_all), not superuser');
SELECT ok((SELECT NOT rolbypassrls AND NOT rolsuper FROM pg_roles WHERE rolname = 'broker_runtime'), 'broker_runtime: no BYPASSRLS');
SELECT ok((SELECT NOT rolbypassrls AND NOT rolsuper FROM pg_roles WHERE rolname = 'broker_enqueue'), 'broker_enqueue: no BYPASSRLS');
SELECT is((SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'broker'), 'broker_admin', 'broker_admin owns schema broker');
SELECT is(ARRAY(SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind = 'r'
                  AND c.relowner <> 'broker_admin'::regrole ORDER BY 1), '{}'::text[], 'broker_admin owns every table');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'broker'::regnamespace
                  AND p.proowner <> 'broker_admin'::regrole ORDER BY 1), '{}'::text[], 'broker_admin owns every function');

-- tables x roles
CREATE FUNCTION pg_temp.matrix(p_table text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE v_all text[] := ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'];
BEGIN
    RETURN NEXT table_privs_are('broker', p_table, 'broker_admin', v_all, p_table || ': broker_admin owns it');
    RETURN NEXT table_privs_are('broker', p_table, 'broker_runtime',
        ARRAY['SELECT'], p_table || ': broker_runtime reads only');
    RETURN NEXT table_privs_are('broker', p_table, 'broker_enqueue',
        CASE WHEN p_table = ANY (ARRAY['broker_jobs', 'broker_job_dependency', 'broker_tenant_roles']) THEN ARRAY['SELECT']
             WHEN p_table = 'broker_schedule' THEN ARRAY['SELECT', 'DELETE']  -- DELETE: own schedules (policy)
             ELSE '{}'::text[] END,
        p_table || ': broker_enqueue reads its tenant''s rows only (writes are column grants, and policies)');
    RETURN NEXT table_privs_are('broker', p_table, 'broker_test_stranger', '{}'::text[], p_table || ': an unrelated login gets nothing');
END $f$;
SELECT * FROM pg_temp.matrix('broker_jobs');
SELECT * FROM pg_temp.matrix('broker_job_dependency');
SELECT * FROM pg_temp.matrix('broker_queueinstance');
SELECT * FROM pg_temp.matrix('broker_schedule');
SELECT * FROM pg_temp.matrix('broker_schema_migrations');
SELECT * FROM pg_temp.matrix('broker_config');
SELECT * FROM pg_temp.matrix('broker_tenant_roles');

-- column grants of broker_enqueue: what it may write
SELECT column_privs_are('broker', 'broker_jobs', 'execute_str', 'broker_enqueue', ARRAY['SELECT', 'INSERT'],
                        'enqueue may set execute_str when inserting');
SELECT column_privs_are('broker', 'broker_jobs', 'concurrency_key', 'broker_enqueue', ARRAY['SELECT', 'INSERT'],
                        'enqueue may set a job''s concurrency key when inserting, not change it');
SELECT column_privs_are('broker', 'broker_schedule', 'concurrency_key', 'broker_enqueue', ARRAY['SELECT', 'INSERT', 'UPDATE'],
                        'enqueue may set and change its schedules'' concurrency key');
SELECT column_privs_are('broker', 'broker_jobs', 'cancel_reason', 'broker_enqueue', ARRAY['SELECT', 'UPDATE'],
                        'enqueue may only update cancel_reason');
SELECT column_privs_are('broker', 'broker_jobs', 'complete_status', 'broker_enqueue', ARRAY['SELECT'],
                        'enqueue cannot write complete_status');
SELECT column_privs_are('broker', 'broker_jobs', 'enqueued_by', 'broker_enqueue', ARRAY['SELECT'],
                        'enqueue cannot forge enqueued_by');
SELECT column_privs_are('broker', 'broker_jobs', 'tenant_id', 'broker_enqueue', ARRAY['SELECT'],
                        'enqueue cannot write tenant_id');
SELECT column_privs_are('broker', 'broker_jobs', 'pending_deps', 'broker_enqueue', ARRAY['SELECT'],
                        'enqueue cannot write pending_deps');
SELECT column_privs_are('broker', 'broker_task_name_tenant', 'task_name', 'broker_enqueue', ARRAY['SELECT', 'INSERT'],
                        'enqueue records the task names its tenant uses (broker._task_queue, as the enqueuing role; policy: its own tenant''s)');
SELECT column_privs_are('broker', 'broker_task_name_tenant', 'created_at', 'broker_enqueue', ARRAY['SELECT'],
                        'and cannot date a use');

-- functions x roles
SELECT function_privs_are('broker', 'broker_add_job',
    ARRAY['text', 'text', 'integer', 'integer', 'text', 'text', 'bigint', 'bigint[]', 'text', 'integer', 'text', 'text[]',
          'timestamp with time zone', 'interval', 'text', 'text', 'boolean', 'text'], 'broker_enqueue', ARRAY['EXECUTE'], 'enqueue may add jobs');
SELECT function_privs_are('broker', 'broker_add_job',
    ARRAY['text', 'text', 'integer', 'integer', 'text', 'text', 'bigint', 'bigint[]', 'text', 'integer', 'text', 'text[]',
          'timestamp with time zone', 'interval', 'text', 'text', 'boolean', 'text'], 'broker_runtime', '{}'::text[], 'runtime does not enqueue');
-- autonomous jobs: only an administrator allows them; only the runtime starts them and records them
SELECT function_privs_are('broker', 'broker_allow_autonomous', ARRAY['text', 'text'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot allow autonomous jobs');
SELECT function_privs_are('broker', 'broker_allow_autonomous', ARRAY['text', 'text'], 'broker_runtime', '{}'::text[],
                          'runtime cannot allow autonomous jobs');
SELECT function_privs_are('broker', 'broker_autonomous_begin', ARRAY['bigint', 'uuid'], 'broker_runtime', ARRAY['EXECUTE'],
                          'runtime starts autonomous jobs');
SELECT function_privs_are('broker', 'broker_autonomous_end', ARRAY['bigint', 'uuid', 'text', 'text', 'interval', 'boolean'],
                          'broker_enqueue', '{}'::text[], 'enqueue cannot record an outcome');
SELECT table_privs_are('broker', 'broker_autonomous_role', 'broker_enqueue', ARRAY['SELECT'], 'enqueue reads its arrangements only');
SELECT function_privs_are('broker', 'broker_get', ARRAY['integer', 'bigint', 'integer', 'integer', 'uuid'], 'broker_runtime',
                          ARRAY['EXECUTE'], 'runtime claims');
SELECT function_privs_are('broker', 'broker_get', ARRAY['integer', 'bigint', 'integer', 'integer', 'uuid'], 'broker_enqueue',
                          '{}'::text[], 'enqueue cannot claim');
SELECT function_privs_are('broker', 'broker_claim_batches', ARRAY['integer', 'bigint', 'integer', 'integer', 'interval', 'boolean', 'integer', 'uuid'],
                          'broker_runtime', ARRAY['EXECUTE'], 'runtime claims in batches');
SELECT function_privs_are('broker', 'broker_claim_batches', ARRAY['integer', 'bigint', 'integer', 'integer', 'interval', 'boolean', 'integer', 'uuid'],
                          'broker_enqueue', '{}'::text[], 'enqueue cannot claim in batches');
SELECT function_privs_are('broker', 'broker_run', ARRAY['bigint', 'uuid'], 'broker_runtime', ARRAY['EXECUTE'], 'runtime runs jobs');
SELECT function_privs_are('broker', 'broker_run', ARRAY['bigint', 'uuid'], 'broker_enqueue', '{}'::text[], 'enqueue cannot run jobs');
SELECT function_privs_are('broker', 'broker_run', ARRAY['bigint', 'uuid'], 'broker_test_stranger', '{}'::text[],
                          'an unrelated login cannot run jobs');
SELECT function_privs_are('broker', 'broker_cancel_job', ARRAY['bigint', 'text'], 'broker_enqueue', ARRAY['EXECUTE'],
                          'enqueue may cancel (its tenant''s pending jobs)');
SELECT function_privs_are('broker', 'broker_set_strict_tenancy', ARRAY['boolean'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot switch strict tenancy');
SELECT function_privs_are('broker', 'broker_recover_stale_jobs', ARRAY['integer'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot recover jobs');
SELECT function_privs_are('broker', 'broker_apply_deferred_releases', ARRAY['integer'], 'broker_runtime', ARRAY['EXECUTE'],
                          'runtime applies deferred releases (its maintenance)');
SELECT function_privs_are('broker', 'broker_apply_deferred_releases', ARRAY['integer'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot apply releases');
SELECT function_privs_are('broker', 'broker_interrupt_jobs', ARRAY['bigint[]', 'uuid[]'], 'broker_runtime', ARRAY['EXECUTE'],
                          'runtime records the runs it ended at shutdown');
SELECT function_privs_are('broker', 'broker_interrupt_jobs', ARRAY['bigint[]', 'uuid[]'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot interrupt jobs');

-- retention: broker_retention purges and does nothing else; broker_runtime does not purge
SELECT has_role('broker_retention');
SELECT ok((SELECT NOT rolbypassrls AND NOT rolsuper AND NOT rolcanlogin FROM pg_roles WHERE rolname = 'broker_retention'),
          'broker_retention: no BYPASSRLS, no login of its own');
SELECT function_privs_are('broker', 'broker_purge_jobs', ARRAY['interval', 'integer', 'smallint'], 'broker_retention',
                          ARRAY['EXECUTE'], 'broker_retention may purge');
SELECT function_privs_are('broker', 'broker_purge_jobs', ARRAY['interval', 'integer', 'smallint'], 'broker_runtime',
                          '{}'::text[], 'broker_runtime may not purge');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'broker'::regnamespace
                  AND has_function_privilege('broker_retention', p.oid, 'EXECUTE')
                  AND NOT has_function_privilege('broker_test_stranger', p.oid, 'EXECUTE') ORDER BY 1),
          ARRAY['broker.broker_purge_jobs(interval,integer,smallint)'], 'broker_retention may call nothing else of the broker''s');
SELECT is(ARRAY(SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'broker'::regnamespace
                  AND has_table_privilege('broker_retention', c.oid, 'SELECT,INSERT,UPDATE,DELETE')), '{}'::text[],
          'broker_retention reads and writes no table');
SELECT function_privs_are('broker', 'broker_stale_instance_holder', ARRAY['interval'], 'broker_runtime', ARRAY['EXECUTE'],
                          'a standby may look for a lock left behind');

-- flow control seen: both roles read the statistics (a tenant its own, by row-level security); only the
-- monitoring role reads every tenant's
SELECT function_privs_are('broker', 'broker_tenant_stats', ARRAY['interval'], 'broker_enqueue', ARRAY['EXECUTE'],
                          'enqueue reads its tenant''s shares');
SELECT function_privs_are('broker', 'broker_key_stats', '{}'::text[], 'broker_runtime', ARRAY['EXECUTE'],
                          'runtime reads the keys'' limits and use');
SELECT function_privs_are('broker', 'broker_job_waiting', ARRAY['bigint'], 'broker_enqueue', ARRAY['EXECUTE'],
                          'enqueue reads why its jobs wait');
SELECT function_privs_are('broker', '_tenant_stats_every_tenant', ARRAY['interval'], 'broker_enqueue', '{}'::text[],
                          'enqueue cannot read every tenant''s shares');
SELECT table_privs_are('broker', 'broker_key_limit', 'broker_runtime', ARRAY['SELECT'],
                       'runtime reads limits (its tenant''s and those across tenants), writes none');
-- the finished counts: a tenant reads its own (pgsql-broker status as its login), runtime through broker_queue_stats
SELECT table_privs_are('broker', 'broker_finished_count', 'broker_enqueue', ARRAY['SELECT'],
                       'enqueue reads its tenant''s finished counts, writes none');
SELECT table_privs_are('broker', 'broker_finished_count', 'broker_runtime', '{}'::text[],
                       'runtime reads the finished counts only through broker_queue_stats');

SELECT * FROM finish();
ROLLBACK;
