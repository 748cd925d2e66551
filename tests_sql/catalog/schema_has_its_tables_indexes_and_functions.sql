-- Schema shape: tables, key columns, constraints, indexes, trigger, functions.
BEGIN;
SELECT plan(27);

SELECT has_schema('broker');
SELECT ok(EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgsql_broker')
          OR EXISTS (SELECT 1 FROM broker.broker_schema_migrations WHERE install_path = 'migrations'),
          'pgsql_broker is installed (as an extension, or as tracked migrations)');
SELECT tables_are('broker', ARRAY['broker_jobs', 'broker_job_dependency', 'broker_queueinstance',
                                   'broker_schedule', 'broker_schema_migrations', 'broker_tenant_roles', 'broker_config',
                                   'broker_deferred_release', 'broker_schedule_count',
                                   'broker_job_attempts', 'broker_job_actions', 'broker_queue_pause', 'broker_finished_count', 'broker_autonomous_role', 'broker_task_queue', 'broker_task_name_tenant',
                                   'broker_claim_hint', 'broker_key_limit', 'broker_tenant_weight']);
SELECT columns_are('broker', 'broker_jobs', ARRAY[
    'job_id', 'tenant_id', 'job_name', 'job_group', 'execute_str', 'job_language', 'job_queue',
    'job_priority', 'run_as', 'enqueued_by', 'schedule_id', 'idempotency_key', 'max_attempts',
    'attempts', 'complete_status', 'pending_deps', 'run_after', 'job_timeout', 'job_search_path', 'lease_token',
    'lease_instance_id', 'lease_expires_at', 'created_at', 'started_at', 'finished_at',
    'last_error_sqlstate', 'last_error_message', 'cancel_reason', 'interruptions', 'run_alone', 'autonomous', 'cancel_cause_job_id', 'ready_xid',
    'concurrency_key', 'parked', 'traceparent']);
SELECT col_is_pk('broker', 'broker_jobs', 'job_id', 'job_id is the primary key');
SELECT col_type_is('broker', 'broker_jobs', 'complete_status', 'smallint', 'complete_status is smallint');
SELECT col_default_is('broker', 'broker_jobs', 'complete_status', '0', 'jobs start pending');
SELECT col_default_is('broker', 'broker_jobs', 'max_attempts', '1', 'one attempt by default');
SELECT col_has_check('broker', 'broker_jobs', 'complete_status', 'status is a closed domain');
SELECT col_has_check('broker', 'broker_jobs', ARRAY['job_language', 'job_queue', 'execute_str'], 'language is a closed domain, a task''s queue its own, its arguments JSON');
SELECT col_has_check('broker', 'broker_jobs', ARRAY['job_queue', 'job_language'], 'queue is checked (a task''s is negative)');
SELECT col_has_check('broker', 'broker_jobs', 'max_attempts', 'max_attempts is checked');
SELECT col_has_check('broker', 'broker_queueinstance', 'status', 'instance status is a closed domain');
SELECT col_is_fk('broker', 'broker_job_dependency', 'job_id', 'edges belong to a job');
SELECT col_is_fk('broker', 'broker_job_dependency', 'depends_on_job_id', 'id edges target a job');
SELECT col_is_fk('broker', 'broker_jobs', ARRAY['tenant_id', 'schedule_id'], 'jobs reference a schedule of their own tenant');
SELECT indexes_are('broker', 'broker_jobs', ARRAY[
    'broker_jobs_pkey', 'broker_jobs_claim_idx', 'broker_jobs_lease_idx', 'broker_jobs_group_idx',
    'broker_jobs_idempotency_key_idx', 'broker_jobs_finished_idx', 'broker_jobs_schedule_idx',
    'broker_jobs_cancel_cause_idx', 'broker_jobs_ready_xid_idx', 'broker_jobs_later_idx', 'broker_jobs_key_running_idx',
    'broker_jobs_key_pending_idx']);
SELECT index_is_unique('broker', 'broker_jobs', 'broker_jobs_idempotency_key_idx');
SELECT index_is_unique('broker', 'broker_queueinstance', 'broker_queueinstance_one_active_idx');
SELECT has_trigger('broker', 'broker_jobs', 'broker_jobs_after_insert_trg', 'enqueue trigger (group joins, NOTIFY) exists');
SELECT ok((SELECT every(c.conname ~ '^broker_') FROM pg_constraint c
             JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'broker'),
          'every constraint has an explicit broker_ name');
SELECT ok((SELECT count(*) = 0 FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
             JOIN pg_namespace n ON n.oid = r.relnamespace
            WHERE n.nspname = 'broker' AND c.contype = 'c' AND c.conname !~ '_check$'),
          'check constraints are named *_check');
SELECT functions_are('broker', ARRAY[
    'broker_add_job', 'broker_add_job_simple', 'broker_get', 'broker_claim_batches', 'broker_run', 'broker_set',
    'broker_set_tenant', '_set_tenant', '_call_tenant', '_end_call_tenant', '_whole_transaction', 'broker_current_tenant', 'broker_cancel_job', 'broker_recover_stale_jobs',
    'broker_purge_jobs', 'broker_register_instance', 'broker_ping_instance', 'broker_shutdown_instance', 'broker_park_instance', 'broker_resume_instance', 'broker_stale_instance_holder', '_take_instance_lock', '_end_visit',
    '_setting_int', '_state', '_restart_interruptions_max', '_claim_job_token', '_claimable', '_claimable_by_xid', '_jobs_ready_xid', '_save_claim_hint', '_lock_dependency_keys', '_notify_queues', '_notify_queue', '_notify_due', '_jobs_join_groups', '_lower_pending_deps', 'broker_apply_deferred_releases', '_retry_delay',
    '_release_dependents', '_cancel_dependents', '_complete_job', '_fail_attempt', '_fail_job', '_run_begin',
    '_instance_lock_key', '_finished_merge_lock_key', '_instance_lock_holder', '_live_instance', '_lock_dependents', '_strict_tenancy', '_tenant_allowed', '_may_run_as', '_can_read_every_tenant', '_check_run_as', '_authority_lost',
    'broker_set_strict_tenancy', '_executor', 'broker_create_executor', '_jobs_after_insert',
    '_dependency_before_insert', '_dependency_after_insert', '_jobs_cancel_request', '_grant_hint',
    '_count_pending_deps', '_executor_schema', 'broker_queue_stats',
    -- cron schedules
    'broker_cron_next', '_cron_parse', '_cron_field', '_cron_next_wall', '_cron_utc_offset', 'broker_add_schedule',
    'broker_alter_schedule', 'broker_enable_schedule', 'broker_remove_schedule', 'broker_run_schedule_now', 'broker_schedule_tick',
    '_schedule_check', '_schedule_row', '_schedule_notify', '_schedule_fire', '_schedule_due', '_schedule_tick_at', '_skipped_fires_cap', '_schedule_before_write', '_schedule_count',
    -- the enqueuer's trace context (broker_jobs.traceparent's default)
    '_traceparent', '_is_traceparent', '_checked_traceparent',
    -- bulk enqueue, batched runs
    'broker_add_jobs', '_add_jobs', '_parse_jobs', '_add_plain_jobs', 'broker_add_jobs_arrays', '_jobs_of_arrays', '_job_problem', '_job_field_error', '_blank_in', 'broker_run_batch', '_complete_jobs', '_release_dependents_of', '_dependency_cycle', '_dependency_waiters', '_dependency_node_key', '_dependency_lock_key',
    '_job_error', '_error_text', '_executor_call', '_lock_batch', '_executor_jobs', '_run_jobs_compat',
    -- what a run refuses and undoes (run_guard.sql), handing claimed jobs back
    '_guarded_settings', '_session_state', '_advisory_locks', '_restore_session', '_int4_key', '_commit_time_code',
    '_run_guarded', '_refusal', '_deferrable_code', '_written_tables', 'broker_release_jobs', 'broker_release_claim', '_check_lease_args', '_active_instance',
    -- the finished-job counters behind broker_queue_stats
    '_finished_minute', '_count_finished', '_count_finished_updated', '_count_finished_deleted', '_count_finished_truncate', '_merge_finished_counts', '_finished_counts_since',
    -- what the runner ended at shutdown
    'broker_interrupt_jobs',
    -- what a runner reads on its session connection, and shows
    'broker_ready_queues', 'broker_next_due', 'broker_job_activity',

    -- operating jobs: cancel running ones, retry, pause queues, attempt history and output
    '_cancel_requests', '_cancel_handed_back', '_cancel_requested', '_cancel_running', '_end_cancelled', '_notify_cancel', 'broker_retry_job', '_retry_job',
    '_job_action', 'broker_pause_queue', 'broker_pause_task', '_pause', '_tasks_as_jobs', 'broker_add_task_schedule', '_add_schedule', '_schedule_job_name', '_is_broker_admin', '_paused_tenants', '_command_status', '_record_attempts',
    'broker_set_output', 'broker_cancel_requests',

    -- flow control: fair share, limits on concurrency keys, parked jobs
    '_parked', '_due_time', '_claimable_by_id', '_key_lock_key', '_unpark_key', 'broker_set_limit', 'broker_set_tenant_weight', '_admit_keyed',
    '_jobs_park_later', '_jobs_park_again', '_unpark_due', '_jobs_key_slot_freed', '_key_limit_changed', '_claim_lane',
    '_paused_for', '_queue_totals', '_key_totals', '_tenant_stats_rows', '_key_stats_rows', '_tenant_stats_every_tenant',
    '_key_stats_every_tenant', '_sees_every_tenant', 'broker_tenant_stats', 'broker_key_stats', 'broker_job_waiting',

    -- autonomous jobs: the enqueue-time checks, the arrangements, the runner's side
    '_sql_tokens', '_transaction_words', '_transaction_keywords', '_may_not_run_in_transaction', '_never_in_transaction', '_autonomous_kind', '_autonomous_refuse_kind',
    '_autonomous_via', '_check_autonomous', 'broker_allow_autonomous', 'broker_disallow_autonomous',
    'broker_autonomous_begin', 'broker_autonomous_extend', 'broker_autonomous_end',

    -- tasks: jobs run by application code, and the claim they share with SQL jobs
    '_claim', '_check_task_name', '_task_queue', '_task_queue_of', '_task_queue_is', '_task_actor', '_task_lease', '_task_leases', 'broker_add_task', 'broker_claim_tasks',
    'broker_extend_task', 'broker_complete_task', 'broker_fail_task', 'broker_release_task', 'broker_complete_tasks',

    -- the console's charts
    '_finished_kept', 'broker_finished_per_minute',

    -- every function that gives or renews a lease
    '_check_lease_seconds']);
SELECT function_returns('broker', 'broker_add_job',
    ARRAY['text', 'text', 'integer', 'integer', 'text', 'text', 'bigint', 'bigint[]', 'text', 'integer',
          'text', 'text[]', 'timestamp with time zone', 'interval', 'text', 'text', 'boolean', 'text'], 'setof record');
SELECT is((SELECT array_agg(a ORDER BY o)::text[] FROM unnest(
             (SELECT proargnames[1:12] FROM pg_proc WHERE oid = 'broker.broker_add_job'::regproc)) WITH ORDINALITY AS x(a, o)),
          ARRAY['p_job_name', 'p_execute_str', 'p_job_queue', 'p_job_priority', 'p_job_language', 'p_run_as',
                'p_schedule_id', 'p_depends_on_job_ids', 'p_idempotency_key', 'p_max_attempts', 'p_job_group',
                'p_depends_on_groups'],
          'broker_add_job keeps the original twelve parameters in order');
SELECT is((SELECT proargnames[1:4]::text[] FROM pg_proc WHERE oid = 'broker.broker_add_job_simple'::regproc),
          ARRAY['p_job_name', 'p_execute_str', 'p_job_priority', 'p_depends_on_groups'],
          'broker_add_job_simple(name, execute_str, priority, depends_on_groups)');
SELECT ok((SELECT every(p.provolatile IN ('i', 's', 'v')) FROM pg_proc p
             JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'broker'),
          'every function declares its volatility');

SELECT * FROM finish();
ROLLBACK;
