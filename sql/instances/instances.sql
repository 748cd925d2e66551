-- sql/instances/instances.sql: runner instances: register, ping, shut down, the active one.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_register_instance(p_instance_name, p_hostname,
--     p_os_pid, p_queue_count, p_broker_version)
--   Makes the calling session the one active broker instance of this database:
--   takes the broker's session advisory lock (kept until broker_shutdown_instance
--   or the session ends), marks any earlier active row dead (its session is
--   gone, or it could not have released the lock) and returns the new id.
-- Errors: 55P03 another live session is the active instance (a standby keeps
--   retrying); 55000 this session is already registered; 22023 bad arguments.
-- Example:
--   SELECT broker.broker_register_instance('runner-1', 'host-a', 4242, 4, 'pgsql-broker 0.2.0');
--   Calls: _instance_lock_key
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_register_instance(
    p_instance_name  text,
    p_hostname       text    DEFAULT NULL,
    p_os_pid         integer DEFAULT NULL,
    p_queue_count    integer DEFAULT 4,
    p_broker_version text    DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key    record := broker._instance_lock_key();
    v_active broker.broker_queueinstance;
    v_id     bigint;
BEGIN
    IF p_instance_name IS NULL OR pg_catalog.btrim(p_instance_name) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'broker_register_instance: p_instance_name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue_count IS NULL OR p_queue_count OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_register_instance: p_queue_count must be >= 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_active FROM broker.broker_queueinstance AS i WHERE i.status OPERATOR(pg_catalog.=) 'active';
    IF FOUND AND v_active.backend_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks AS l
                    WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
                      AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                                              WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                      AND l.classid::integer OPERATOR(pg_catalog.=) v_key.classid
                      AND l.objid::integer OPERATOR(pg_catalog.=) v_key.objid AND l.objsubid OPERATOR(pg_catalog.=) 2) THEN
        RAISE EXCEPTION 'broker_register_instance: this session is already active instance %', v_active.instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT pg_catalog.pg_try_advisory_lock(v_key.classid, v_key.objid) THEN
        RAISE EXCEPTION 'broker_register_instance: database % already has an active broker instance', pg_catalog.current_database()
            USING ERRCODE = 'lock_not_available',
                  DETAIL = CASE WHEN v_active.instance_id IS NULL THEN 'Its registration is in progress.'
                           ELSE pg_catalog.format('Instance %s (%s on %s, pid %s), last ping %s.', v_active.instance_id,
                                v_active.instance_name, COALESCE(v_active.hostname, '?'),
                                COALESCE(v_active.os_pid::text, '?'), v_active.last_ping_at) END,
                  HINT = 'Run this one as a standby: retry until the active instance stops.';
    END IF;
    -- We hold the lock, so any row still marked active belongs to a dead session.
    UPDATE broker.broker_queueinstance AS i
       SET status = 'dead', stopped_at = pg_catalog.clock_timestamp()
     WHERE i.status OPERATOR(pg_catalog.=) 'active';
    INSERT INTO broker.broker_queueinstance (instance_name, hostname, os_pid, queue_count, broker_version)
    VALUES (p_instance_name, p_hostname, p_os_pid, p_queue_count, p_broker_version)
    RETURNING instance_id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_register_instance(text, text, integer, integer, text) IS
    'Registers the calling session as the single active broker instance of the database (session advisory lock); 55P03 while another is alive.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_ping_instance(p_instance_id)
--   Heartbeat of the active instance; returns the ping time.
-- Errors: 55000 the instance is not active or this session does not own it.
-- Example:
--   SELECT broker.broker_ping_instance(7);   -- from the session that registered instance 7
--   Calls: none
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_ping_instance(p_instance_id bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    UPDATE broker.broker_queueinstance AS i
       SET last_ping_at = v_now
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id
       AND i.status OPERATOR(pg_catalog.=) 'active'
       AND i.backend_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_ping_instance: instance % is not the active instance of this session', p_instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Register again with broker_register_instance.';
    END IF;
    RETURN v_now;
END;
$$;
COMMENT ON FUNCTION broker.broker_ping_instance(bigint) IS
    'Heartbeat of the active instance (must be called from the session that registered it); returns the ping time.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_shutdown_instance(p_instance_id)
--   Clean shutdown, from the instance's own session (as ping): marks the
--   instance stopped and releases the advisory lock so a standby can take
--   over at once. Returns true when the instance was active, false when it
--   was not (already stopped, or dead).
-- Errors: 55000 the instance is active in another session.
-- Example:
--   SELECT broker.broker_shutdown_instance(7);   -- from the session that registered instance 7
--   Calls: _instance_lock_key
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_shutdown_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key record := broker._instance_lock_key();
    v_pid integer;
BEGIN
    SELECT i.backend_pid INTO v_pid FROM broker.broker_queueinstance AS i
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'active';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
        RAISE EXCEPTION 'broker_shutdown_instance: instance % is not the active instance of this session', p_instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Stop it from its own session (stop the runner), or terminate that session.';
    END IF;
    UPDATE broker.broker_queueinstance AS i
       SET status = 'stopped', stopped_at = pg_catalog.clock_timestamp()
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id;
    PERFORM pg_catalog.pg_advisory_unlock(v_key.classid, v_key.objid);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_shutdown_instance(bigint) IS
    'Marks the instance of this session stopped and releases the active-instance lock; returns true when it was active. 55000 from another session.';

-- ---------------------------------------------------------------------------
-- Function: broker._active_instance()
--   The id of the active instance, or NULL when none is active.
--   Calls: none
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._active_instance()
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT i.instance_id FROM broker.broker_queueinstance AS i
     WHERE i.status OPERATOR(pg_catalog.=) 'active' ORDER BY i.instance_id DESC LIMIT 1
$$;
COMMENT ON FUNCTION broker._active_instance() IS
    'Internal: the id of the active runner instance, or NULL.';
