-- sql/tables/broker_jobs.sql: table of jobs, their state and their indexes.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_jobs
--   One row per job. complete_status: 0 pending, 1 running (claimed, under a
--   lease), 2 completed, 3 failed, 4 cancelled. A run that its runner ended
--   (shutdown deadline) returns the job to pending without counting the
--   attempt; interruptions counts those, apart from attempts. run_alone is
--   what the broker learned of a job that ran past a batch's budget, or that
--   shared a transaction whose session died: it is never batched with other
--   jobs again (broker_run_batch, broker_release_jobs).
--   pending_deps counts the unfinished jobs this job still waits on (one per
--   id edge whose target is unfinished, one per unfinished member of each
--   group it depends on, plus the releases of finished ones still listed in
--   broker_deferred_release); it is kept exact by broker_add_job and the
--   finish functions, so that claiming never has to look at blocked jobs.
--   ready_xid is the transaction that wrote the row version while it is
--   pending and unblocked (its default, and broker_jobs_ready_xid_trg): a
--   claim that starts at its queue's hint (broker_claim_hint) adds the jobs
--   whose ready_xid the hint's snapshot does not see (sql/run/claim.sql).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_jobs (
    job_id              bigint      GENERATED ALWAYS AS IDENTITY,
    tenant_id           text        NOT NULL DEFAULT broker.broker_current_tenant(),
    job_name            text        NOT NULL,
    job_group           text        NOT NULL,
    execute_str         text        NOT NULL,
    job_language        text        NOT NULL DEFAULT 'sql',
    job_queue           integer     NOT NULL DEFAULT 1,
    job_priority        integer     NOT NULL DEFAULT 0,
    run_as              name        NOT NULL DEFAULT CURRENT_USER,
    enqueued_by         name        NOT NULL DEFAULT CURRENT_USER,
    schedule_id         bigint,
    idempotency_key     text,
    max_attempts        integer     NOT NULL DEFAULT 1,
    attempts            integer     NOT NULL DEFAULT 0,
    complete_status     smallint    NOT NULL DEFAULT 0,
    pending_deps        integer     NOT NULL DEFAULT 0,
    run_after           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    job_timeout         interval,
    job_search_path     text        NOT NULL DEFAULT '"$user", public',
    lease_token         uuid,
    lease_instance_id   bigint,
    lease_expires_at    timestamptz,
    created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    last_error_sqlstate text,
    last_error_message  text,
    cancel_reason       text,
    interruptions       integer     NOT NULL DEFAULT 0,
    run_alone           boolean     NOT NULL DEFAULT false,
    autonomous          boolean     NOT NULL DEFAULT false,
    cancel_cause_job_id bigint,
    ready_xid           xid8        NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    concurrency_key     text,
    parked              smallint    NOT NULL DEFAULT 0,
    -- (a nullable column: a job without a trace context costs one bit of the row's null bitmap, which the
    -- row has anyway; its default reads the enqueuer's setting, so no enqueue path passes it on)
    traceparent         text        DEFAULT broker._traceparent(),
    CONSTRAINT broker_jobs_pkey PRIMARY KEY (job_id),
    -- (tenant_id, schedule_id): a job can only point at a schedule of its own tenant
    CONSTRAINT broker_jobs_schedule_id_fkey FOREIGN KEY (tenant_id, schedule_id)
        REFERENCES broker.broker_schedule (tenant_id, schedule_id) ON DELETE SET NULL (schedule_id),
    CONSTRAINT broker_jobs_job_name_check
        CHECK (pg_catalog.btrim(job_name) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(job_name) OPERATOR(pg_catalog.<=) 200),
    CONSTRAINT broker_jobs_job_group_check
        CHECK (pg_catalog.btrim(job_group) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(job_group) OPERATOR(pg_catalog.<=) 200),
    CONSTRAINT broker_jobs_execute_str_check CHECK (pg_catalog.btrim(execute_str) OPERATOR(pg_catalog.<>) ''),
    -- (Each CHECK is read from the catalog and prepared again at every statement that writes a row,
    -- a single-row INSERT or a claim's UPDATE alike, at a cost that grows with its operators: they
    -- are written with as few as say the same, e.g. one = ANY of a constant array, not two bounds.)
    -- A task, run by application code, sits in its name's queue (negative, which no runner serves;
    -- broker_task_queue), and its execute_str is its arguments, which a claim returns as jsonb: JSON
    -- on every way in (broker_add_job, broker_add_jobs, a raw INSERT), or one row would fail every
    -- claim of its name (22P02 from the cast, which CASE keeps off every other job).
    CONSTRAINT broker_jobs_job_language_check
        CHECK (CASE WHEN job_language OPERATOR(pg_catalog.=) 'task'
                    THEN job_queue OPERATOR(pg_catalog.<) 0 AND execute_str::pg_catalog.jsonb IS NOT NULL
                    ELSE job_language OPERATOR(pg_catalog.=) ANY ('{sql,plpgsql}'::pg_catalog.text[]) END),
    -- (1 to 1000; a task's queue is negative, by the check above)
    CONSTRAINT broker_jobs_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.<@) '[1,1000]'::pg_catalog.int4range OR job_language OPERATOR(pg_catalog.=) 'task'),
    CONSTRAINT broker_jobs_max_attempts_check CHECK (max_attempts OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_jobs_attempts_check CHECK (attempts OPERATOR(pg_catalog.>=) 0),
    CONSTRAINT broker_jobs_interruptions_check CHECK (interruptions OPERATOR(pg_catalog.>=) 0),
    CONSTRAINT broker_jobs_complete_status_check CHECK (complete_status OPERATOR(pg_catalog.=) ANY ('{0,1,2,3,4}'::pg_catalog.int2[])),
    CONSTRAINT broker_jobs_pending_deps_check CHECK (pending_deps OPERATOR(pg_catalog.>=) 0),
    CONSTRAINT broker_jobs_job_timeout_check CHECK (job_timeout OPERATOR(pg_catalog.>) interval '0'),
    CONSTRAINT broker_jobs_idempotency_key_check
        CHECK (pg_catalog.btrim(idempotency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(idempotency_key) OPERATOR(pg_catalog.<=) 512),
    CONSTRAINT broker_jobs_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200),
    CONSTRAINT broker_jobs_parked_check CHECK (parked OPERATOR(pg_catalog.=) ANY ('{0,1,2,3}'::pg_catalog.int2[])),
    CONSTRAINT broker_jobs_lease_check
        CHECK ((complete_status OPERATOR(pg_catalog.=) 1) OPERATOR(pg_catalog.=) (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- Claim path: each tenant's claimable jobs of a queue, highest priority, then earliest
-- run_after, then id (the fair share serves tenants in turn). Parked jobs (dated later, or held
-- back by a limit on their key) are out of it. (Its predicate is broker._claimable written out,
-- as index predicates and CHECKs keep the state numbers; queries calling broker._claimable
-- inline to this same expression.)
CREATE INDEX broker_jobs_claim_idx ON broker.broker_jobs
    (job_queue, tenant_id, job_priority DESC, run_after, job_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND pending_deps OPERATOR(pg_catalog.=) 0 AND parked OPERATOR(pg_catalog.=) 0;
COMMENT ON INDEX broker.broker_jobs_claim_idx IS
    'The claim: each tenant''s claimable jobs of a queue in claim order (priority, then age); parked jobs are out of it.';
-- Claim path under a held snapshot: ready jobs of a queue by the transaction that made them
-- ready, so that a claim finds the ones made ready since its hint (broker_claim_hint) without
-- stepping over the claim index's dead entries. Its predicate says "<= 0" (the same rows, by
-- the CHECKs) so that the queries that say so can use no other index: the planner would take
-- the claim index in claim order and filter on ready_xid, over every ready job. And it says
-- "ready_xid IS NOT NULL" (always true) so that only queries on ready_xid can use it: a generic
-- plan made on a small table could otherwise read it whole, and sort, for a claim-order query.
CREATE INDEX broker_jobs_ready_xid_idx ON broker.broker_jobs (job_queue, ready_xid)
    WHERE complete_status OPERATOR(pg_catalog.<=) 0 AND pending_deps OPERATOR(pg_catalog.<=) 0 AND parked OPERATOR(pg_catalog.<=) 0
      AND ready_xid IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_ready_xid_idx IS
    'Ready jobs of a queue by the transaction that made them ready: what a claim that starts at its queue''s hint adds (broker_get).';
-- Parked until due: what a claim unparks once their time has come.
CREATE INDEX broker_jobs_later_idx ON broker.broker_jobs (job_queue, run_after)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND parked OPERATOR(pg_catalog.=) 1;
COMMENT ON INDEX broker.broker_jobs_later_idx IS
    'Jobs parked until their run_after, by queue and time: what a claim unparks once due (broker._unpark_due).';
-- Concurrency keys: the running count of a key's cap, and its pending jobs (parked by its limits or not).
CREATE INDEX broker_jobs_key_running_idx ON broker.broker_jobs (concurrency_key, tenant_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 1 AND concurrency_key IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_key_running_idx IS
    'Claimed jobs by concurrency key and tenant: the running count a key''s cap is checked against.';
CREATE INDEX broker_jobs_key_pending_idx ON broker.broker_jobs
    (concurrency_key, tenant_id, job_priority DESC, run_after, job_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND concurrency_key IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_key_pending_idx IS
    'Pending jobs with a concurrency key, by key and tenant in claim order: what a claim parks at the key''s limit, and a freed slot or a new token unparks.';
-- Recovery path: running jobs by lease expiry.
CREATE INDEX broker_jobs_lease_idx ON broker.broker_jobs (lease_expires_at)
    WHERE complete_status OPERATOR(pg_catalog.=) 1;
-- Group fan-in: unfinished members of a group; and the unfinished jobs for the statistics that count
-- them (broker_queue_stats, the status of an enqueue login, the console's pending and running lists).
-- ("job_group IS NOT NULL", always true, so that only queries on job_group can use it, or that say
-- length(job_group) > 0, as the statistics do: a claim's generic plan, made on a small table, could
-- otherwise read it by tenant and sort.)
CREATE INDEX broker_jobs_group_idx ON broker.broker_jobs (tenant_id, job_group)
    WHERE complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]) AND job_group IS NOT NULL;
-- Idempotency: one unfinished job per key and tenant.
CREATE UNIQUE INDEX broker_jobs_idempotency_key_idx ON broker.broker_jobs (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
-- Retention: finished jobs by final state and age (broker_purge_jobs reads one state at a time,
-- oldest first, so each batch reads only the rows it deletes).
CREATE INDEX broker_jobs_finished_idx ON broker.broker_jobs (complete_status, finished_at)
    WHERE complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[]);
-- Retry with dependents: the jobs cancelled because of a job.
CREATE INDEX broker_jobs_cancel_cause_idx ON broker.broker_jobs (cancel_cause_job_id)
    WHERE cancel_cause_job_id IS NOT NULL;
CREATE INDEX broker_jobs_schedule_idx ON broker.broker_jobs (schedule_id)
    WHERE schedule_id IS NOT NULL;

-- A queue table: vacuum it early so dead claim-index entries do not pile up.
ALTER TABLE broker.broker_jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);

COMMENT ON TABLE broker.broker_jobs IS
    'Jobs: SQL executed inside the database, claimed with expiring leases. complete_status 0 pending, 1 running, 2 completed, 3 failed, 4 cancelled.';
COMMENT ON COLUMN broker.broker_jobs.job_id IS 'Job id.';
COMMENT ON COLUMN broker.broker_jobs.tenant_id IS 'Owning tenant (broker.tenant_id at enqueue, default ''default'').';
COMMENT ON COLUMN broker.broker_jobs.job_name IS 'Human-readable name (1-200 characters).';
COMMENT ON COLUMN broker.broker_jobs.job_group IS 'Group for fan-in dependencies; defaults to job_name.';
COMMENT ON COLUMN broker.broker_jobs.execute_str IS 'The SQL to execute (for plpgsql: the body of an anonymous DO block; for a task: its arguments, a JSON value).';
COMMENT ON COLUMN broker.broker_jobs.job_language IS 'sql or plpgsql, run by the runner; task: run by application code (its job_name is the task name).';
COMMENT ON COLUMN broker.broker_jobs.job_queue IS 'Queue number (1 to 1000); each runner worker serves one queue. A task: its name''s queue (negative, broker_task_queue).';
COMMENT ON COLUMN broker.broker_jobs.job_priority IS 'Higher runs first; ties run oldest first.';
COMMENT ON COLUMN broker.broker_jobs.run_as IS 'Role the job runs as, through its executor (the enqueuer by default).';
COMMENT ON COLUMN broker.broker_jobs.enqueued_by IS 'Role that enqueued the job.';
COMMENT ON COLUMN broker.broker_jobs.schedule_id IS 'Schedule that enqueued the job, if any.';
COMMENT ON COLUMN broker.broker_jobs.idempotency_key IS 'Enqueueing again with the same key (at most 512 characters) returns this job while it is pending or running.';
COMMENT ON COLUMN broker.broker_jobs.max_attempts IS 'Attempts allowed before the job fails (>= 1).';
COMMENT ON COLUMN broker.broker_jobs.attempts IS 'Attempts started so far (counted at claim).';
COMMENT ON COLUMN broker.broker_jobs.complete_status IS '0 pending, 1 running, 2 completed, 3 failed, 4 cancelled.';
COMMENT ON COLUMN broker.broker_jobs.pending_deps IS 'Dependencies still blocking the job (unfinished ones, and finished ones whose release is deferred); claimable only at 0.';
COMMENT ON COLUMN broker.broker_jobs.run_after IS 'Not claimable before this time (delays and retry backoff).';
COMMENT ON COLUMN broker.broker_jobs.job_timeout IS 'Per-job time limit applied by the runner as statement_timeout; NULL: none.';
COMMENT ON COLUMN broker.broker_jobs.job_search_path IS 'search_path the job''s SQL runs with (broker_add_job: the enqueuer''s at enqueue).';
COMMENT ON COLUMN broker.broker_jobs.lease_token IS 'Token of the current claim; broker_run can check it.';
COMMENT ON COLUMN broker.broker_jobs.lease_instance_id IS 'Runner instance that holds the claim, when it said so.';
COMMENT ON COLUMN broker.broker_jobs.lease_expires_at IS 'When an idle claim may be recovered (a job still executing never is).';
COMMENT ON COLUMN broker.broker_jobs.created_at IS 'When the job was enqueued.';
COMMENT ON COLUMN broker.broker_jobs.started_at IS 'When the latest attempt was claimed.';
COMMENT ON COLUMN broker.broker_jobs.finished_at IS 'When the job reached status 2, 3 or 4.';
COMMENT ON COLUMN broker.broker_jobs.last_error_sqlstate IS 'SQLSTATE of the latest failed attempt.';
COMMENT ON COLUMN broker.broker_jobs.last_error_message IS 'Error message of the latest failed attempt (at most 2,000 characters, then a truncation marker).';
COMMENT ON COLUMN broker.broker_jobs.cancel_reason IS 'Why the job was cancelled.';
COMMENT ON COLUMN broker.broker_jobs.interruptions IS 'Runs ended by their runner at shutdown (broker_interrupt_jobs) or by a server restart (broker_recover_stale_jobs): the job went back to pending without counting the attempt.';
COMMENT ON COLUMN broker.broker_jobs.run_alone IS 'true once a run of the job went past the budget of a transaction of several jobs (broker_run_batch), or it shared a transaction whose session died (broker_release_jobs p_run_alone): it then runs in a transaction of its own, its attempt not counted for that run.';
COMMENT ON COLUMN broker.broker_jobs.cancel_cause_job_id IS 'For a job cancelled because a job it waited on (directly or transitively) failed or was cancelled: that job (broker_retry_job brings them back together).';
COMMENT ON COLUMN broker.broker_jobs.autonomous IS 'Runs outside a transaction block, on a connection of its own, at least once (broker_add_job p_autonomous; see broker_allow_autonomous).';
COMMENT ON COLUMN broker.broker_jobs.concurrency_key IS 'Key whose limits (broker_set_limit: running at once, starts per second) the job counts against; NULL: none.';
COMMENT ON COLUMN broker.broker_jobs.parked IS 'Why a pending job is out of the claim index: 0 not parked, 1 until its run_after (later), 2 its key at its cap (cap), 3 its key out of tokens (rate). See broker._parked.';
COMMENT ON COLUMN broker.broker_jobs.traceparent IS 'The enqueuer''s W3C trace context (its transaction''s setting broker.traceparent at enqueue, checked by broker._traceparent); NULL: none. The runner and the task worker make each attempt''s span a child of it.';
COMMENT ON COLUMN broker.broker_jobs.ready_xid IS 'Transaction that made this row version pending and unblocked (set by its default and by the trigger broker_jobs_ready_xid_trg); claims use it with broker_claim_hint.';
