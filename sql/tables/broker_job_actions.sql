-- ---------------------------------------------------------------------------
-- Table: broker.broker_job_actions
--   Operator actions on jobs, one row each: a cancel request for a running
--   job (broker_cancel_job) or a retry (broker_retry_job). Inserting the row
--   is the action: the policies check it as the caller (its own tenant, its
--   own name), then a trigger does the work with the broker's rights
--   (broker._job_action). A cancel request is committed on its own, so the
--   transaction running the job sees it (READ COMMITTED) when its runner
--   cancels the statement; it applies to the attempt under way when it was
--   made (requested_at >= the job's started_at). Kept with the job and purged
--   with it.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_job_actions (
    action_id        bigint      GENERATED ALWAYS AS IDENTITY,
    job_id           bigint      NOT NULL,
    tenant_id        text        NOT NULL DEFAULT broker.broker_current_tenant(),
    action           text        NOT NULL,
    reason           text,
    run_after        timestamptz,
    with_dependents  boolean     NOT NULL DEFAULT true,
    requested_by     name        NOT NULL DEFAULT CURRENT_USER,
    requested_at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    CONSTRAINT broker_job_actions_pkey PRIMARY KEY (action_id),
    CONSTRAINT broker_job_actions_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES broker.broker_jobs (job_id) ON DELETE CASCADE,
    CONSTRAINT broker_job_actions_action_check CHECK (action OPERATOR(pg_catalog.=) ANY (ARRAY['cancel', 'retry'])),
    CONSTRAINT broker_job_actions_reason_check CHECK (pg_catalog.length(reason) OPERATOR(pg_catalog.<=) 2000)
);
CREATE INDEX broker_job_actions_job_idx ON broker.broker_job_actions (job_id, action_id);
-- Monitoring: recent cancels and retries (broker_queue_stats).
CREATE INDEX broker_job_actions_requested_idx ON broker.broker_job_actions (requested_at);

COMMENT ON TABLE broker.broker_job_actions IS
    'Operator actions on jobs: cancel requests for running jobs and retries; inserting a row performs it (checked as the caller, done by a trigger).';
COMMENT ON COLUMN broker.broker_job_actions.action_id IS 'Action id.';
COMMENT ON COLUMN broker.broker_job_actions.job_id IS 'The job acted on.';
COMMENT ON COLUMN broker.broker_job_actions.tenant_id IS 'Tenant of the job (the caller''s).';
COMMENT ON COLUMN broker.broker_job_actions.action IS 'cancel (a running job) or retry (a failed or cancelled job).';
COMMENT ON COLUMN broker.broker_job_actions.reason IS 'cancel: the reason the job ends with (at most 2,000 characters).';
COMMENT ON COLUMN broker.broker_job_actions.run_after IS 'retry: not claimable before this time (NULL: now).';
COMMENT ON COLUMN broker.broker_job_actions.with_dependents IS 'retry: also return the jobs cancelled because of this one.';
COMMENT ON COLUMN broker.broker_job_actions.requested_by IS 'Role that asked.';
COMMENT ON COLUMN broker.broker_job_actions.requested_at IS 'When it was asked.';
