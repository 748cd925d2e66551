-- sql/run/guard.sql: the run guard: what a job may not leave behind when its executor returns.
-- ---------------------------------------------------------------------------
-- What a job may not leave behind when its executor returns.
-- Whoever runs jobs (broker_run, broker_run_batch) commits their transaction
-- afterwards, outside any security-definer context: code that PostgreSQL
-- runs at COMMIT runs as that caller's login, not as the job's run_as role.
-- Two kinds of job-created code run there: deferred constraint triggers
-- (queued by DML, fired by COMMIT) and WITH HOLD cursors (their query runs
-- to completion at COMMIT). SET CONSTRAINTS ALL IMMEDIATE cannot rule the
-- first out (a trigger it fires may defer again and queue more), and SQL
-- cannot see the trigger queue, so the run refuses what could queue such an
-- event at all: see _commit_time_code. The executor is owned by the job's
-- role (it may replace its body), so these checks run in the broker's
-- functions, after the executor returned, never inside it.
-- Session state a job sets (session-level settings that act on the
-- connection, session advisory locks, LISTEN, prepared statements) is
-- undone before the run returns, so that neither the caller's COMMIT nor
-- the time until its own reset runs with it (_session_state,
-- _restore_session).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._guarded_settings()
--   The settings the run puts back when a job changed them: those that act on
--   the connection (timeouts that end the session or cancel the caller's next
--   statement, keepalives, client encoding and quoting), on the caller's rest
--   of the transaction and its next one, and the broker's own.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._guarded_settings()
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call, and every run calls this
    RETURN ARRAY['idle_session_timeout', 'idle_in_transaction_session_timeout', 'statement_timeout',
                   'lock_timeout', 'tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count',
                   'tcp_user_timeout', 'client_connection_check_interval', 'client_encoding',
                   'standard_conforming_strings', 'client_min_messages', 'application_name', 'search_path',
                   'row_security', 'default_transaction_read_only', 'default_transaction_isolation',
                   'default_transaction_deferrable', 'DateStyle', 'IntervalStyle', 'TimeZone',
                   'extra_float_digits', 'bytea_output', 'work_mem', 'plan_cache_mode', 'broker.tenant_id']::text[];
END;
$$;
COMMENT ON FUNCTION broker._guarded_settings() IS
    'Internal: the settings a run puts back when a job changed them (connection timeouts, encoding, the broker''s own).';

-- ---------------------------------------------------------------------------
-- Function: broker._session_state()
--   The session state a run compares against afterwards: the values of
--   _guarded_settings, the advisory locks the session holds, its LISTEN
--   channels, its SQL-level prepared statements, its WITH HOLD cursors
--   (name and creation time), and the rows written so far to tables with
--   deferrable code (_deferrable_code: 'trigger oid/rows').
--   Calls: _guarded_settings, _advisory_locks, _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._session_state(OUT settings text[], OUT advisory text[], OUT channels text[],
                                      OUT prepared text[], OUT cursors text[], OUT written text[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    settings := ARRAY(SELECT pg_catalog.current_setting(n.name, true)
                        FROM pg_catalog.unnest(broker._guarded_settings()) WITH ORDINALITY AS n(name, i) ORDER BY n.i);
    advisory := broker._advisory_locks();
    channels := ARRAY(SELECT pg_catalog.pg_listening_channels());
    prepared := ARRAY(SELECT p.name FROM pg_catalog.pg_prepared_statements AS p WHERE p.from_sql);
    cursors := ARRAY(SELECT c.name OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.creation_time::text
                       FROM pg_catalog.pg_cursors AS c WHERE c.is_holdable);
    written := broker._written_tables();
END;
$$;
COMMENT ON FUNCTION broker._session_state() IS
    'Internal: the session state a run compares against after its jobs (guarded settings, advisory locks, LISTEN, prepared statements, holdable cursors).';

-- ---------------------------------------------------------------------------
-- Function: broker._advisory_locks()
--   The advisory locks this session holds (session or transaction level:
--   pg_locks does not tell), as 'classid/objid/objsubid/mode'.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._advisory_locks()
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ARRAY(SELECT pg_catalog.concat_ws('/', l.classid, l.objid, l.objsubid, l.mode)
                   FROM pg_catalog.pg_locks AS l
                  WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory'
                    AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid());
END;
$$;
COMMENT ON FUNCTION broker._advisory_locks() IS
    'Internal: the advisory locks this session holds, as classid/objid/objsubid/mode.';

-- ---------------------------------------------------------------------------
-- Function: broker._restore_session(p_settings, p_advisory, p_channels,
--     p_prepared)
--   After jobs ran: puts back every guarded setting whose value differs from
--   p_settings (at session level, as a job's SET does: a value the caller
--   had set for its transaction only becomes the session's; broker.tenant_id
--   goes back to none for the session and to the caller's value for its
--   transaction); releases the session
--   advisory locks taken since p_advisory (all of them when the session held
--   none before, the usual case of a runner's worker; else each new one,
--   without messages for the transaction-level ones, which stay until the
--   end of the transaction); stops listening when it listened to nothing
--   before (else to the channels it did not listen to); and deallocates the
--   SQL-level prepared statements that are new. A setting that cannot be put
--   back (say temp_buffers after use) is left.
--   Calls: _guarded_settings, _advisory_locks, _int4_key
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._restore_session(p_settings text[], p_advisory text[], p_channels text[], p_prepared text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r     record;
    v_msg text;
    v_n   integer;
BEGIN
    FOR r IN SELECT n.name, p_settings[n.i] AS old
               FROM pg_catalog.unnest(broker._guarded_settings()) WITH ORDINALITY AS n(name, i)
              WHERE pg_catalog.current_setting(n.name, true) IS DISTINCT FROM p_settings[n.i]
    LOOP
        BEGIN
            IF r.name OPERATOR(pg_catalog.=) 'broker.tenant_id' THEN
                -- changed in every run (the executor sets the job's): the session's goes back to none (what
                -- broker_set_tenant leaves), and a tenant the caller set for its transaction stays that
                PERFORM pg_catalog.set_config(r.name, '', false);
                PERFORM pg_catalog.set_config(r.name, COALESCE(r.old, ''), true);
            ELSE
                PERFORM pg_catalog.set_config(r.name, COALESCE(r.old, ''), false);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            NULL;  -- not settable by the broker (a superuser setting a superuser job changed)
        END;
    END LOOP;
    IF pg_catalog.cardinality(p_advisory) OPERATOR(pg_catalog.=) 0 THEN
        PERFORM pg_catalog.pg_advisory_unlock_all();
    ELSE
        v_msg := pg_catalog.set_config('client_min_messages', 'error', true);
        FOR r IN SELECT k[1]::bigint AS classid, k[2]::bigint AS objid, k[3] AS sub, k[4] AS mode
                   FROM pg_catalog.unnest(broker._advisory_locks()) AS a(lock),
                        LATERAL pg_catalog.string_to_array(a.lock, '/') AS k
                  WHERE NOT a.lock OPERATOR(pg_catalog.=) ANY (p_advisory)
        LOOP
            v_n := 0;
            LOOP
                v_n := v_n OPERATOR(pg_catalog.+) 1;
                EXIT WHEN v_n OPERATOR(pg_catalog.>) 1000 OR NOT CASE
                    WHEN r.sub OPERATOR(pg_catalog.=) '1' AND r.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'
                        THEN pg_catalog.pg_advisory_unlock((r.classid OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) r.objid)
                    WHEN r.sub OPERATOR(pg_catalog.=) '1'
                        THEN pg_catalog.pg_advisory_unlock_shared((r.classid OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) r.objid)
                    WHEN r.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'
                        THEN pg_catalog.pg_advisory_unlock(broker._int4_key(r.classid), broker._int4_key(r.objid))
                    ELSE pg_catalog.pg_advisory_unlock_shared(broker._int4_key(r.classid), broker._int4_key(r.objid)) END;
            END LOOP;
        END LOOP;
        v_msg := pg_catalog.set_config('client_min_messages', p_settings[pg_catalog.array_position(broker._guarded_settings(), 'client_min_messages')], true);
    END IF;
    IF pg_catalog.cardinality(p_channels) OPERATOR(pg_catalog.=) 0 THEN
        UNLISTEN *;  -- also a LISTEN of this transaction (not listed before COMMIT)
    ELSE
        FOR r IN SELECT c.ch FROM pg_catalog.pg_listening_channels() AS c(ch)
                  WHERE NOT c.ch OPERATOR(pg_catalog.=) ANY (p_channels)
        LOOP
            EXECUTE pg_catalog.format('UNLISTEN %I', r.ch);
        END LOOP;
    END IF;
    FOR r IN SELECT p.name FROM pg_catalog.pg_prepared_statements AS p
              WHERE p.from_sql AND NOT p.name OPERATOR(pg_catalog.=) ANY (p_prepared)
    LOOP
        EXECUTE pg_catalog.format('DEALLOCATE %I', r.name);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._restore_session(text[], text[], text[], text[]) IS
    'Internal: undo the session state jobs left (guarded settings, session advisory locks, LISTEN, prepared statements).';

-- ---------------------------------------------------------------------------
-- Function: broker._int4_key(p_oid)
--   An advisory lock key half as pg_locks shows it (an oid), as the integer
--   pg_advisory_lock(int, int) took.
--   Calls: _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._int4_key(p_oid bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (CASE WHEN p_oid OPERATOR(pg_catalog.>=) 2147483648 THEN p_oid OPERATOR(pg_catalog.-) 4294967296
                   ELSE p_oid END)::integer $$;
COMMENT ON FUNCTION broker._int4_key(bigint) IS
    'Internal: an advisory lock key half from pg_locks (oid) as the int4 it was taken with.';

-- ---------------------------------------------------------------------------
-- Function: broker._written_tables()
--   The tables with triggers that this transaction wrote so far, as
--   'oid/rows written' (its statistics counters), this session's temporary
--   ones with triggers included; empty at once when the database has no
--   DEFERRABLE trigger at all, the usual case. Work grows with the tables
--   that have triggers, not with how many triggers anyone created.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._written_tables()
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call, and every run calls this
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS p WHERE p.tgdeferrable) THEN
        RETURN ARRAY[]::text[];
    END IF;
    RETURN ARRAY(
        SELECT w.oid::text OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) w.n::text
          FROM (SELECT c.oid, pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid)
                              OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_xact_tuples_updated(c.oid)
                              OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid) AS n
                  FROM pg_catalog.pg_class AS c
                 WHERE c.relhastriggers AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p']::"char"[])
                   AND (c.relpersistence OPERATOR(pg_catalog.<>) 't'
                        OR c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())) AS w
         WHERE w.n OPERATOR(pg_catalog.>) 0
         ORDER BY w.oid);
END;
$$;
COMMENT ON FUNCTION broker._written_tables() IS
    'Internal: the tables with triggers this transaction wrote so far, as oid/rows (empty when no DEFERRABLE trigger exists).';

-- ---------------------------------------------------------------------------
-- Function: broker._deferrable_code(p_tables)
--   The DEFERRABLE constraint triggers on the tables p_tables that can run
--   code other than PostgreSQL's own, as (trigger oid, table, trigger name).
--   Foreign keys (their checks run as the table's owner) and unique,
--   primary key and exclusion constraints on plain columns are not listed;
--   a SECURITY DEFINER trigger function is (what it writes at COMMIT can
--   queue further events). Reads the triggers of those tables only (index
--   on tgrelid). Generic plans: a custom plan of the catalog join, made
--   again at every call (once per batch of jobs), cost more than running it;
--   no table, no query (the usual case: no DEFERRABLE trigger anywhere).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._deferrable_code(p_tables oid[], OUT trigger_oid oid, OUT rel regclass, OUT trigger_name name)
RETURNS SETOF record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF pg_catalog.cardinality(p_tables) OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.oid, t.tgrelid::regclass, t.tgname
      FROM pg_catalog.pg_trigger AS t
      JOIN pg_catalog.pg_proc AS f ON f.oid OPERATOR(pg_catalog.=) t.tgfoid
      LEFT JOIN pg_catalog.pg_constraint AS k ON k.oid OPERATOR(pg_catalog.=) t.tgconstraint
      LEFT JOIN pg_catalog.pg_index AS x ON x.indexrelid OPERATOR(pg_catalog.=) k.conindid
     WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY (p_tables)
       AND t.tgdeferrable
       AND NOT (t.tgisinternal AND f.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
                AND (f.proname OPERATOR(pg_catalog.~~) 'RI\_FKey\_%'
                     OR (f.proname OPERATOR(pg_catalog.=) 'unique_key_recheck'
                         AND x.indexprs IS NULL AND x.indpred IS NULL)))
     ORDER BY t.tgrelid, t.tgname;
END;
$$;
COMMENT ON FUNCTION broker._deferrable_code(oid[]) IS
    'Internal: the DEFERRABLE constraint triggers on the given tables that can run code at COMMIT.';

-- ---------------------------------------------------------------------------
-- Function: broker._commit_time_code(p_cursors, p_written)
--   What jobs left that would run at COMMIT, as the message of the refusal,
--   or NULL when nothing: a WITH HOLD cursor not in p_cursors (those the
--   session had before), or a trigger of _deferrable_code on a table the
--   jobs wrote (not in p_written, the _written_tables from before they ran,
--   with as many rows) or on one of this session's temporary tables; with
--   track_counts off, on any table with triggers.
--   Calls: _deferrable_code, _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._commit_time_code(p_cursors text[], p_written text[])
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN COALESCE(
        (SELECT pg_catalog.format('the job left the WITH HOLD cursor %I open', c.name)
           FROM pg_catalog.pg_cursors AS c
          WHERE c.is_holdable
            AND NOT (c.name OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.creation_time::text)
                    OPERATOR(pg_catalog.=) ANY (p_cursors)
          LIMIT 1),
        (SELECT pg_catalog.format('the job modified table %s, which has the DEFERRABLE constraint trigger %I',
                                  d.rel, d.trigger_name)
           FROM broker._deferrable_code(CASE
                    WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS p WHERE p.tgdeferrable)
                        THEN ARRAY[]::oid[]
                    WHEN NOT pg_catalog.current_setting('track_counts')::boolean
                        THEN ARRAY(SELECT c.oid FROM pg_catalog.pg_class AS c WHERE c.relhastriggers
                                      AND (c.relpersistence OPERATOR(pg_catalog.<>) 't'
                                           OR c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()))
                    ELSE ARRAY(SELECT pg_catalog.split_part(w.t, '/', 1)::oid
                                 FROM pg_catalog.unnest(broker._written_tables()) AS w(t)
                                WHERE NOT w.t OPERATOR(pg_catalog.=) ANY (p_written)
                               UNION
                               SELECT c.oid FROM pg_catalog.pg_class AS c
                                WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
                                  AND c.relhastriggers) END) AS d
          LIMIT 1));
END;
$$;
COMMENT ON FUNCTION broker._commit_time_code(text[], text[]) IS
    'Internal: what jobs left that would run at COMMIT as the caller''s login (a new WITH HOLD cursor, a DEFERRABLE trigger on a table they wrote), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._run_guarded(p_call, p_sqls, p_languages, p_search_paths,
--     p_tenant_id)
--   Runs jobs through p_call (a run_jobs-shaped statement taking $1..$4, see
--   broker_run_batch) in a subtransaction, puts the session back
--   (_restore_session) and checks what they left for COMMIT
--   (_commit_time_code). Returns each job's error (NULL: success) and run
--   time, in order, and refused NULL; or, when they left code for COMMIT,
--   everything they did rolled back, the arrays NULL and refused the reason.
--   Under a batch budget (broker.batch_deadline set before the call: see
--   broker_run_batch), the budget's statement_timeout can also fire outside
--   every job (between two of them, or while the session is put back): then
--   everything they did is rolled back too, and the arrays and refused are
--   all NULL (none of them ran; the caller passes them again). The handler
--   names query_canceled: WHEN OTHERS does not catch it.
--   Calls: _session_state, _restore_session, _commit_time_code
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._run_guarded(p_call text, p_sqls text[], p_languages text[], p_search_paths text[],
    p_tenant_id text, OUT states text[], OUT messages text[], OUT durations interval[], OUT refused text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_before record := broker._session_state();
    v_budget boolean := COALESCE(pg_catalog.current_setting('broker.batch_deadline', true), '') OPERATOR(pg_catalog.<>) '';
BEGIN
    BEGIN
        EXECUTE p_call INTO states, messages, durations USING p_sqls, p_languages, p_search_paths, p_tenant_id;
        PERFORM broker._restore_session(v_before.settings, v_before.advisory, v_before.channels, v_before.prepared);
        refused := broker._commit_time_code(v_before.cursors, v_before.written);
        IF refused IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'PB001', MESSAGE = refused;
        END IF;
    EXCEPTION
        WHEN SQLSTATE 'PB001' THEN
            states := NULL;
            messages := NULL;
            durations := NULL;
            refused := SQLERRM;
        WHEN query_canceled THEN
            IF NOT v_budget THEN
                RAISE;
            END IF;
            -- (what a rollback leaves: session advisory locks, prepared statements; the timer fired already)
            PERFORM broker._restore_session(v_before.settings, v_before.advisory, v_before.channels, v_before.prepared);
            states := NULL;
            messages := NULL;
            durations := NULL;
            refused := NULL;
    END;
END;
$$;
COMMENT ON FUNCTION broker._run_guarded(text, text[], text[], text[], text) IS
    'Internal: run jobs through their executor, undo the session state they left, and roll them back when they left code for COMMIT.';

-- ---------------------------------------------------------------------------
-- Function: broker._refusal(p_reason, p_run_as)
--   The stored message of a job refused for code it left for COMMIT
--   (p_reason from _commit_time_code), with what to do; NULL for NULL.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._refusal(p_reason text, p_run_as name)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.format('refused: %s; code left for COMMIT would run as the login that runs the jobs, '
                             'not as %I, so nothing of the job was kept. Close WITH HOLD cursors before the job '
                             'ends, and make constraint triggers of tables that jobs write NOT DEFERRABLE', p_reason, p_run_as)
     WHERE p_reason IS NOT NULL
$$;
COMMENT ON FUNCTION broker._refusal(text, name) IS
    'Internal: the message of a job refused because it left code for COMMIT (what, and what to do instead).';
