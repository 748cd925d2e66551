-- ---------------------------------------------------------------------------
-- Table: broker.broker_key_limit
--   Limits on concurrency keys (broker_jobs.concurrency_key): how many of a
--   key's jobs may be claimed at once (max_running: from the claim to the
--   job's end) and how many may start per second (a token bucket of
--   per_second, holding at most burst). A row with a tenant limits that
--   tenant's jobs of the key (broker_set_limit); a row with tenant_id NULL
--   limits the key's jobs of every tenant together (administrators only).
--   tokens and tokens_at are the bucket as the last claim left it; wake_at is
--   when a job parked for want of a token may start (the claim unparks them
--   then). Written by broker_set_limit and the claim.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_key_limit (
    tenant_id       text             DEFAULT broker.broker_current_tenant(),
    concurrency_key text             NOT NULL,
    max_running     integer,
    per_second      double precision,
    burst           integer,
    tokens          double precision,
    tokens_at       timestamptz,
    wake_at         timestamptz,
    set_by          name             NOT NULL DEFAULT CURRENT_USER,
    set_at          timestamptz      NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_key_limit_key UNIQUE NULLS NOT DISTINCT (concurrency_key, tenant_id),
    CONSTRAINT broker_key_limit_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200),
    CONSTRAINT broker_key_limit_max_running_check CHECK (max_running OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_key_limit_per_second_check
        CHECK (per_second OPERATOR(pg_catalog.>) 0 AND per_second OPERATOR(pg_catalog.<=) 1000000),
    CONSTRAINT broker_key_limit_burst_check CHECK (burst OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_key_limit_some_check CHECK (max_running IS NOT NULL OR per_second IS NOT NULL),
    CONSTRAINT broker_key_limit_rate_check CHECK ((per_second IS NULL) OPERATOR(pg_catalog.=) (burst IS NULL))
);
CREATE INDEX broker_key_limit_wake_idx ON broker.broker_key_limit (wake_at) WHERE wake_at IS NOT NULL;

COMMENT ON TABLE broker.broker_key_limit IS
    'Limits on concurrency keys: jobs claimed at once and starts per second, per tenant or (tenant_id NULL) across tenants.';
COMMENT ON COLUMN broker.broker_key_limit.tenant_id IS 'The tenant whose jobs of the key are limited; NULL: every tenant''s together.';
COMMENT ON COLUMN broker.broker_key_limit.concurrency_key IS 'The key (broker_jobs.concurrency_key).';
COMMENT ON COLUMN broker.broker_key_limit.max_running IS 'At most this many of the key''s jobs claimed at once (claim to end); NULL: no cap.';
COMMENT ON COLUMN broker.broker_key_limit.per_second IS 'Starts per second (token bucket refill); NULL: no rate.';
COMMENT ON COLUMN broker.broker_key_limit.burst IS 'Tokens the bucket holds at most (default: per_second rounded up).';
COMMENT ON COLUMN broker.broker_key_limit.tokens IS 'Tokens left at tokens_at.';
COMMENT ON COLUMN broker.broker_key_limit.tokens_at IS 'When tokens was computed.';
COMMENT ON COLUMN broker.broker_key_limit.wake_at IS 'When the next token is due for jobs parked for want of one (NULL: none parked).';
COMMENT ON COLUMN broker.broker_key_limit.set_by IS 'Role that set the limit.';
COMMENT ON COLUMN broker.broker_key_limit.set_at IS 'When.';
COMMENT ON INDEX broker.broker_key_limit_wake_idx IS 'Keys whose parked jobs get a token at wake_at (the claim unparks them).';
