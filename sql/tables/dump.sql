-- sql/tables/dump.sql: pg_dump registration of the data tables (CREATE EXTENSION only).
-- ---------------------------------------------------------------------------
-- pg_dump: the rows of extension tables are not dumped unless registered as
-- configuration tables. Register every table that holds user data, and the
-- identity sequences behind them, so a dump/restore keeps jobs, schedules,
-- tenant mappings and options. pg_extension_config_dump() only exists inside
-- CREATE EXTENSION, so `pgsql-broker install --no-extension` leaves this block
-- out (there, the tables are ordinary tables and pg_dump dumps them anyway).
-- ---------------------------------------------------------------------------
-- <extension-only>
SELECT pg_catalog.pg_extension_config_dump('broker.broker_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_jobs_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_dependency', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_dependency_dependency_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_deferred_release', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_deferred_release_release_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schedule', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schedule_schedule_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queueinstance', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queueinstance_instance_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schema_migrations', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_tenant_roles', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_config', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_attempts_attempt_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_actions', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_actions_action_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queue_pause', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_key_limit', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_tenant_weight', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_autonomous_role', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_queue', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_queue_job_queue_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_name_tenant', '');
-- </extension-only>
