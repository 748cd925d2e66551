-- sql/tables/broker_queueinstance.sql: table of runner instances.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_queueinstance
--   Runner instances. At most one is current per database: active (it holds
--   the session advisory lock taken by broker_register_instance) or parked
--   (its runner serves the database in turns and is between two visits).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_queueinstance (
    instance_id     bigint      GENERATED ALWAYS AS IDENTITY,
    tenant_id       text        NOT NULL DEFAULT 'default',
    instance_name   text        NOT NULL,
    hostname        text,
    os_pid          integer,
    backend_pid     integer     NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
    queue_count     integer     NOT NULL,
    broker_version  text,
    status          text        NOT NULL DEFAULT 'active',
    started_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_ping_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    stopped_at      timestamptz,
    CONSTRAINT broker_queueinstance_pkey PRIMARY KEY (instance_id),
    CONSTRAINT broker_queueinstance_name_check CHECK (pg_catalog.btrim(instance_name) OPERATOR(pg_catalog.<>) ''),
    CONSTRAINT broker_queueinstance_queue_count_check CHECK (queue_count OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_queueinstance_status_check CHECK (status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked', 'stopped', 'dead'])),
    CONSTRAINT broker_queueinstance_stopped_check CHECK ((status OPERATOR(pg_catalog.=) 'active') OPERATOR(pg_catalog.=) (stopped_at IS NULL))
);

CREATE UNIQUE INDEX broker_queueinstance_one_active_idx
    ON broker.broker_queueinstance ((true)) WHERE status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked']);

COMMENT ON TABLE broker.broker_queueinstance IS
    'Runner instances; at most one current per database: active (it holds the broker session advisory lock) or parked (served in turns, between two visits).';
COMMENT ON COLUMN broker.broker_queueinstance.instance_id IS 'Instance id.';
COMMENT ON COLUMN broker.broker_queueinstance.tenant_id IS 'Always ''default'': instances serve the whole database.';
COMMENT ON COLUMN broker.broker_queueinstance.instance_name IS 'Broker name from its configuration.';
COMMENT ON COLUMN broker.broker_queueinstance.hostname IS 'Host the runner process runs on.';
COMMENT ON COLUMN broker.broker_queueinstance.os_pid IS 'Operating-system pid of the runner process.';
COMMENT ON COLUMN broker.broker_queueinstance.backend_pid IS 'Backend pid of the session that registered (holds the lock).';
COMMENT ON COLUMN broker.broker_queueinstance.queue_count IS 'Number of queues the instance serves.';
COMMENT ON COLUMN broker.broker_queueinstance.broker_version IS 'Runner version.';
COMMENT ON COLUMN broker.broker_queueinstance.status IS 'active, parked (its runner serves the database in turns and will resume it; stopped_at: when it parked), stopped (clean shutdown, or parked and replaced) or dead (replaced after its session died).';
COMMENT ON COLUMN broker.broker_queueinstance.started_at IS 'Registration time.';
COMMENT ON COLUMN broker.broker_queueinstance.last_ping_at IS 'Last broker_ping_instance.';
COMMENT ON COLUMN broker.broker_queueinstance.stopped_at IS 'When it stopped, parked or was found dead.';
