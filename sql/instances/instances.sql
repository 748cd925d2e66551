-- sql/instances/instances.sql: runner instances: register, ping, shut down, the active one.
-- ---------------------------------------------------------------------------
-- Function: broker._instance_lock_holder()
--   The backend pid that holds the active-instance session advisory lock of
--   this database, or NULL when no session holds it.
--   Calls: _instance_lock_key
--   Tables: none (pg_locks)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._instance_lock_holder()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT l.pid
      FROM pg_catalog.pg_locks AS l, broker._instance_lock_key() AS k
     WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
       AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                               WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       AND l.classid::integer OPERATOR(pg_catalog.=) k.classid
       AND l.objid::integer OPERATOR(pg_catalog.=) k.objid AND l.objsubid OPERATOR(pg_catalog.=) 2
     LIMIT 1
$$;
COMMENT ON FUNCTION broker._instance_lock_holder() IS
    'Internal: the pid of the session holding the active-instance advisory lock of this database, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._live_instance()
--   The active instance whose session is alive (it holds the instance lock),
--   or NULL: a row still marked active whose session ended (the runner was
--   killed, or cut off until the server ended its session) is not live.
--   Calls: _instance_lock_holder
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._live_instance()
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT i.instance_id
      FROM broker.broker_queueinstance AS i
     WHERE i.status OPERATOR(pg_catalog.=) 'active'
       AND i.backend_pid OPERATOR(pg_catalog.=) broker._instance_lock_holder()
$$;
COMMENT ON FUNCTION broker._live_instance() IS
    'Internal: the id of the active instance when its session holds the instance lock, else NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._take_instance_lock(p_caller)
--   Takes the broker's session advisory lock for the calling session, or
--   raises 55P03 naming the instance that holds it (p_caller names the public
--   function in the message).
--   Calls: _instance_lock_key
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._take_instance_lock(p_caller text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key    record := broker._instance_lock_key();
    v_active broker.broker_queueinstance;
BEGIN
    IF pg_catalog.pg_try_advisory_lock(v_key.classid, v_key.objid) THEN
        RETURN;
    END IF;
    SELECT * INTO v_active FROM broker.broker_queueinstance AS i WHERE i.status OPERATOR(pg_catalog.=) 'active';
    RAISE EXCEPTION '%: database % already has an active broker instance', p_caller, pg_catalog.current_database()
        USING ERRCODE = 'lock_not_available',
              DETAIL = CASE WHEN v_active.instance_id IS NULL THEN 'Its registration is in progress.'
                       ELSE pg_catalog.format('Instance %s (%s on %s, pid %s), last ping %s.', v_active.instance_id,
                            v_active.instance_name, COALESCE(v_active.hostname, '?'),
                            COALESCE(v_active.os_pid::text, '?'), v_active.last_ping_at) END,
              HINT = 'Run this one as a standby: retry until the active instance stops.';
END;
$$;
COMMENT ON FUNCTION broker._take_instance_lock(text) IS
    'Internal: takes the active-instance session advisory lock, or raises 55P03 naming the holder.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_register_instance(p_instance_name, p_hostname,
--     p_os_pid, p_queue_count, p_broker_version)
--   Makes the calling session the one active broker instance of this database:
--   takes the broker's session advisory lock (kept until broker_shutdown_instance,
--   broker_park_instance or the session ends), marks any earlier active row dead
--   (its session is gone, or it could not have released the lock) and a parked
--   one stopped, and returns the new id.
-- Errors: 55P03 another live session is the active instance (a standby keeps
--   retrying); 55000 this session is already registered; 22023 bad arguments.
-- Example:
--   SELECT broker.broker_register_instance('runner-1', 'host-a', 4242, 4, 'pgsql-broker 0.3.0');
--   Calls: _instance_lock_holder, _take_instance_lock
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
       AND broker._instance_lock_holder() OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() THEN
        RAISE EXCEPTION 'broker_register_instance: this session is already active instance %', v_active.instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM broker._take_instance_lock('broker_register_instance');
    -- We hold the lock, so any row still marked active belongs to a dead session, and a parked one to a
    -- runner that is between two visits: this instance replaces it.
    UPDATE broker.broker_queueinstance AS i
       SET status = CASE WHEN i.status OPERATOR(pg_catalog.=) 'parked' THEN 'stopped' ELSE 'dead' END,
           stopped_at = COALESCE(i.stopped_at, pg_catalog.clock_timestamp())
     WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked']);
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
-- Function: broker._end_visit(p_instance_id, p_status, p_caller)
--   The active instance of the calling session becomes p_status (stopped or
--   parked) and the advisory lock is released; false when the instance is not
--   active. 55000 (naming p_caller) when it is active in another session.
--   Calls: _instance_lock_key
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._end_visit(p_instance_id bigint, p_status text, p_caller text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
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
        RAISE EXCEPTION '%: instance % is not the active instance of this session', p_caller, p_instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Stop or park it from its own session (stop the runner), or terminate that session.';
    END IF;
    UPDATE broker.broker_queueinstance AS i
       SET status = p_status, stopped_at = pg_catalog.clock_timestamp()
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id;
    PERFORM pg_catalog.pg_advisory_unlock(v_key.classid, v_key.objid);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker._end_visit(bigint, text, text) IS
    'Internal: the active instance of this session becomes stopped or parked and releases the active-instance lock.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_shutdown_instance(p_instance_id)
--   Clean shutdown, from the instance's own session (as ping): marks the
--   instance stopped and releases the advisory lock so a standby can take
--   over at once. A parked instance (broker_park_instance) holds no session:
--   any session may stop it. Returns true when the instance was active or
--   parked, false when it was not (already stopped, or dead).
-- Errors: 55000 the instance is active in another session.
-- Example:
--   SELECT broker.broker_shutdown_instance(7);   -- from the session that registered instance 7
--   Calls: _end_visit
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_shutdown_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE broker.broker_queueinstance AS i SET status = 'stopped'
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'parked';
    RETURN FOUND OR broker._end_visit(p_instance_id, 'stopped', 'broker_shutdown_instance');
END;
$$;
COMMENT ON FUNCTION broker.broker_shutdown_instance(bigint) IS
    'Marks the instance of this session stopped and releases the active-instance lock (a parked instance: from any session); returns true when it was active or parked. 55000 when it is active in another session.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_park_instance(p_instance_id)
--   For a runner that serves more databases than it may hold sessions to
--   (max_open_conns_total): from the instance's own session, marks it parked
--   and releases the advisory lock, so the runner can close this session and
--   visit the database again later with broker_resume_instance. A parked
--   instance is still the database's current one (no second instance may be
--   parked or active beside it) until another instance registers, which stops
--   it. Returns true when the instance was active, false when it was not.
-- Errors: 55000 the instance is active in another session.
-- Example:
--   SELECT broker.broker_park_instance(7);   -- from the session that registered instance 7
--   Calls: _end_visit
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_park_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT broker._end_visit(p_instance_id, 'parked', 'broker_park_instance')
$$;
COMMENT ON FUNCTION broker.broker_park_instance(bigint) IS
    'Marks the instance of this session parked (its runner visits the database in turns) and releases the active-instance lock; true when it was active. 55000 from another session.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_resume_instance(p_instance_id)
--   A runner's next visit to a database it parked: takes the advisory lock
--   and makes the parked instance active again in the calling session, with
--   the same id (its claims and history stay under it). Returns false, and
--   keeps no lock, when the instance is no longer parked (another instance
--   registered meanwhile): the caller registers anew.
-- Errors: 55P03 another live session is the active instance; 22023 NULL id.
-- Example:
--   SELECT broker.broker_resume_instance(7);
--   Calls: _instance_lock_key, _take_instance_lock
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_resume_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key record := broker._instance_lock_key();
BEGIN
    IF p_instance_id IS NULL THEN
        RAISE EXCEPTION 'broker_resume_instance: p_instance_id must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._take_instance_lock('broker_resume_instance');
    UPDATE broker.broker_queueinstance AS i
       SET status = 'active', stopped_at = NULL, backend_pid = pg_catalog.pg_backend_pid(),
           last_ping_at = pg_catalog.clock_timestamp()
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'parked';
    IF NOT FOUND THEN
        PERFORM pg_catalog.pg_advisory_unlock(v_key.classid, v_key.objid);
        RETURN false;
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_resume_instance(bigint) IS
    'Makes a parked instance active again in the calling session (takes the active-instance lock); false, without the lock, when it is no longer parked. 55P03 while another instance is active.';

-- ---------------------------------------------------------------------------
-- Function: broker._active_instance()
--   The id of the active instance, or NULL when none is active. PL/pgSQL,
--   not SQL: a SQL function with SET is planned again at every call (every
--   claim calls it).
--   Calls: none
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._active_instance()
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT i.instance_id FROM broker.broker_queueinstance AS i
             WHERE i.status OPERATOR(pg_catalog.=) 'active' ORDER BY i.instance_id DESC LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker._active_instance() IS
    'Internal: the id of the active runner instance, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_stale_instance_holder(p_stale_after)
--   For a standby: the backend pid holding the instance lock when that
--   backend is the registered active instance and its row has not been
--   pinged for p_stale_after (an active runner pings every second): the lock
--   was left behind, typically on a server connection of a transaction-pooling
--   pooler that the runner's session went through, where it outlives the
--   runner. NULL otherwise (no holder, a live one, or a holder that is not the
--   active instance's backend). It only names the backend: the caller ends it
--   with pg_terminate_backend, which PostgreSQL allows for a backend of the
--   caller's own role (the runner's login), so a standby can never end
--   another role's session through this function.
-- Errors: 22023 p_stale_after NULL or under 1 second.
-- Example:
--   SELECT pg_terminate_backend(pid, 5000)
--     FROM broker.broker_stale_instance_holder(interval '60 seconds') AS pid WHERE pid IS NOT NULL;
--   Calls: _live_instance
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_stale_instance_holder(p_stale_after interval)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_stale_after IS NULL OR p_stale_after OPERATOR(pg_catalog.<) interval '1 second' THEN
        RAISE EXCEPTION 'broker_stale_instance_holder: p_stale_after must be at least 1 second'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (SELECT i.backend_pid
              FROM broker.broker_queueinstance AS i
             WHERE i.instance_id OPERATOR(pg_catalog.=) broker._live_instance()
               AND i.backend_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
               AND i.last_ping_at OPERATOR(pg_catalog.<) (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p_stale_after)
             LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker.broker_stale_instance_holder(interval) IS
    'For a standby: the pid of the backend holding the instance lock when it is the active instance and has not pinged for p_stale_after (a lock left behind); else NULL.';
