-- ---------------------------------------------------------------------------
-- Table: broker.broker_job_attempts
--   One row per attempt of a job, like pg_cron's job_run_details: when it
--   was claimed and ended, its outcome, SQLSTATE and message, the runner
--   instance that held it and, for a completed attempt, what the job did (the
--   command status of its last statement, the rows it affected, and the small
--   value it returned with broker_set_output, or a task's output given to
--   broker_complete_task). Written in the transaction
--   that records the outcome, so an attempt and its job never disagree; kept
--   with the job and purged with it (ON DELETE CASCADE, by the job_id index).
--   outcome: completed, failed (the job may still be retried), cancelled (a
--   cancel request stopped it), interrupted (its runner ended it at shutdown:
--   not counted), lost (its lease expired with no session executing it).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_job_attempts (
    attempt_id      bigint      GENERATED ALWAYS AS IDENTITY,
    job_id          bigint      NOT NULL,
    tenant_id       text        NOT NULL,
    attempt         integer     NOT NULL,
    instance_id     bigint,
    started_at      timestamptz,
    finished_at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    outcome         text        NOT NULL,
    error_sqlstate  text,
    error_message   text,
    command_status  text,
    rows_affected   bigint,
    output          text,
    CONSTRAINT broker_job_attempts_pkey PRIMARY KEY (attempt_id),
    CONSTRAINT broker_job_attempts_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES broker.broker_jobs (job_id) ON DELETE CASCADE,
    CONSTRAINT broker_job_attempts_outcome_check
        CHECK (outcome OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled', 'interrupted', 'lost']))
);
-- A job's attempts in order, and the purge's cascade (by job_id alone).
CREATE INDEX broker_job_attempts_job_idx ON broker.broker_job_attempts (job_id, attempt_id);
-- Monitoring: recent lost leases (broker_queue_stats).
CREATE INDEX broker_job_attempts_lost_idx ON broker.broker_job_attempts (finished_at)
    WHERE outcome OPERATOR(pg_catalog.=) 'lost';

COMMENT ON TABLE broker.broker_job_attempts IS
    'Attempt history: every attempt of a job with its start, end, outcome, SQLSTATE, message, runner instance and output; purged with its job.';
COMMENT ON COLUMN broker.broker_job_attempts.attempt_id IS 'Attempt row id (ascending in the order attempts ended).';
COMMENT ON COLUMN broker.broker_job_attempts.job_id IS 'The job.';
COMMENT ON COLUMN broker.broker_job_attempts.tenant_id IS 'Tenant of the job.';
COMMENT ON COLUMN broker.broker_job_attempts.attempt IS 'The job''s attempts counter for this attempt (1 for the first; a retried job starts again at 1).';
COMMENT ON COLUMN broker.broker_job_attempts.instance_id IS 'Runner instance that held the claim, when it said so.';
COMMENT ON COLUMN broker.broker_job_attempts.started_at IS 'When the attempt was claimed.';
COMMENT ON COLUMN broker.broker_job_attempts.finished_at IS 'When its outcome was recorded.';
COMMENT ON COLUMN broker.broker_job_attempts.outcome IS 'completed, failed, cancelled, interrupted (ended by its runner at shutdown, not counted) or lost (lease expired).';
COMMENT ON COLUMN broker.broker_job_attempts.error_sqlstate IS 'SQLSTATE of a failed or cancelled attempt.';
COMMENT ON COLUMN broker.broker_job_attempts.error_message IS 'Its message (at most 2,000 characters).';
COMMENT ON COLUMN broker.broker_job_attempts.command_status IS 'Completed attempt: the command status of the job''s last statement, as psql shows it (INSERT 0 5, UPDATE 3, DO).';
COMMENT ON COLUMN broker.broker_job_attempts.rows_affected IS 'Completed attempt: rows processed by the job''s last statement (GET DIAGNOSTICS ROW_COUNT).';
COMMENT ON COLUMN broker.broker_job_attempts.output IS 'Completed attempt: the value the job passed to broker_set_output, or a task''s p_output of broker_complete_task as JSON text (at most 2,000 characters).';
