-- sql/run/attempts.sql: the attempt history (broker_job_attempts) and a job's output.

-- ---------------------------------------------------------------------------
-- Function: broker._command_status(p_sql, p_language, p_rows)
--   The command status of a job's last statement, as psql shows it: the
--   first keyword of the text after the job's last semicolon, with the rows
--   it processed where PostgreSQL's tag has them (INSERT 0 5, UPDATE 3,
--   SELECT 1, DO; the keyword alone when the row count is unknown, as for
--   an executor made by 0.1.0). PL/pgSQL gives the row count of an EXECUTE (GET
--   DIAGNOSTICS ROW_COUNT, which run_job leaves in broker.job_rows) but not
--   its command tag, hence the keyword: a
--   last statement that starts with WITH is shown as WITH <rows>. NULL when
--   no keyword is found.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._command_status(p_sql text, p_language text, p_rows bigint)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_last text := pg_catalog.rtrim(p_sql, E' \t\r\n;');
    v_word text;
    v_n    integer := pg_catalog.strpos(pg_catalog.reverse(v_last), ';');
BEGIN
    IF p_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
        RETURN 'DO';
    END IF;
    IF p_language OPERATOR(pg_catalog.=) 'task' THEN
        RETURN NULL;  -- (its text is its arguments)
    END IF;
    -- string functions, not regular expressions over the whole text: a third of the cost, once per job
    IF v_n OPERATOR(pg_catalog.>) 0 THEN
        v_last := pg_catalog.right(v_last, v_n OPERATOR(pg_catalog.-) 1);
    END IF;
    LOOP  -- past blanks and -- comments
        v_last := pg_catalog.ltrim(v_last, E' \t\r\n');
        EXIT WHEN NOT pg_catalog.starts_with(v_last, '--');
        v_n := pg_catalog.strpos(v_last, E'\n');
        v_last := CASE WHEN v_n OPERATOR(pg_catalog.=) 0 THEN '' ELSE pg_catalog.substr(v_last, v_n OPERATOR(pg_catalog.+) 1) END;
    END LOOP;
    v_word := pg_catalog.upper(pg_catalog.substring(v_last, '^[A-Za-z]+'));
    RETURN CASE WHEN v_word IS NULL OR p_rows IS NULL THEN v_word
                WHEN v_word OPERATOR(pg_catalog.=) 'INSERT' THEN 'INSERT 0 ' OPERATOR(pg_catalog.||) p_rows::text
                WHEN v_word OPERATOR(pg_catalog.=) ANY (ARRAY['UPDATE', 'DELETE', 'SELECT', 'MERGE', 'COPY', 'FETCH', 'MOVE',
                                                              'WITH', 'VALUES', 'TABLE'])
                    THEN v_word OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) p_rows::text
                ELSE v_word END;
END;
$$;
COMMENT ON FUNCTION broker._command_status(text, text, bigint) IS
    'Internal: the command status of a job''s last statement (its first keyword, with the row count where PostgreSQL''s tag has one).';

-- ---------------------------------------------------------------------------
-- Function: broker._record_attempts(p_job_ids, p_outcome, p_sqlstates,
--     p_messages, p_outputs)
--   Appends one attempt row per job to broker_job_attempts, from the job's
--   row as it is before its outcome is written (attempt number, claim time,
--   instance), with outcome p_outcome and, by position, SQLSTATE, message
--   and, for a completed attempt, the executor's report of the run
--   (p_outputs: '<rows>' || chr(31) || '<broker.job_output>'; anything else
--   is ignored, never an error: run_jobs is the job role's own function).
--   Messages and outputs are capped like error messages (_error_text).
--   Calls: _error_text, _command_status
--   Tables: reads broker_jobs, writes broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._record_attempts(p_job_ids bigint[], p_outcome text, p_sqlstates text[] DEFAULT NULL,
    p_messages text[] DEFAULT NULL, p_outputs text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO broker.broker_job_attempts AS a
           (job_id, tenant_id, attempt, instance_id, started_at, outcome, error_sqlstate, error_message,
            command_status, rows_affected, output)
    SELECT j.job_id, j.tenant_id, j.attempts, j.lease_instance_id, j.started_at, p_outcome, u.state,
           CASE WHEN u.msg IS NOT NULL THEN broker._error_text(u.msg) END,
           CASE WHEN p_outcome OPERATOR(pg_catalog.=) 'completed'
                THEN broker._command_status(j.execute_str, j.job_language, r.n) END,
           r.n, CASE WHEN r.o OPERATOR(pg_catalog.<>) '' THEN broker._error_text(r.o) END
      FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_sqlstates), pg_catalog.unnest(p_messages),
                      pg_catalog.unnest(p_outputs)) WITH ORDINALITY AS u(id, state, msg, raw, ord)
      JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) u.id
      CROSS JOIN LATERAL (
          SELECT CASE WHEN pg_catalog.split_part(u.raw, pg_catalog.chr(31), 1) OPERATOR(pg_catalog.~) '^[0-9]{1,18}$'
                      THEN pg_catalog.split_part(u.raw, pg_catalog.chr(31), 1)::bigint END AS n,
                 CASE WHEN pg_catalog.strpos(u.raw, pg_catalog.chr(31)) OPERATOR(pg_catalog.>) 0
                      THEN pg_catalog.substr(u.raw, pg_catalog.strpos(u.raw, pg_catalog.chr(31)) OPERATOR(pg_catalog.+) 1) END AS o
      ) AS r
     WHERE u.id IS NOT NULL
     ORDER BY u.ord;
END;
$$;
COMMENT ON FUNCTION broker._record_attempts(bigint[], text, text[], text[], text[]) IS
    'Internal: append attempt rows (outcome, SQLSTATE, message, output) for jobs, read before their outcome is written.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_output(p_value)
--   Called by a job: the small value its attempt returns, kept in
--   broker_job_attempts.output when the attempt completes (at most 2,000
--   characters, then a truncation marker; the last call wins). It sets the
--   transaction-local setting broker.job_output, which a job whose role may
--   not use schema broker can set itself:
--   SELECT set_config('broker.job_output', '...', true). NULL clears it.
-- Example:
--   SELECT broker.broker_set_output(format('%s rows archived', 1200));   -- inside the job's SQL
--   Calls: _error_text
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_output(p_value text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pg_catalog.set_config('broker.job_output', COALESCE(broker._error_text(p_value), ''), true);
END;
$$;
COMMENT ON FUNCTION broker.broker_set_output(text) IS
    'Called by a job: the small value (at most 2,000 characters) its completed attempt records as output.';
