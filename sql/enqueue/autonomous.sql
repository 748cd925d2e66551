-- sql/enqueue/autonomous.sql: the enqueue-time checks of a job's SQL against how it runs (autonomous jobs: one allowed statement, a role with the arrangement).
-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_kind(p_fn, p_sql)
--   The enqueue-time check of an autonomous job's text: exactly one
--   statement of an allowed kind, in a shape this lexer (_sql_tokens) is sure
--   of: no comment, no dollar quote or $n, no string with a prefix or a
--   backslash, no Unicode identifier, no ';' but one at the end, and only
--   the characters ( ) , . = < > + - * / [ ] : besides words, numbers,
--   standard strings and quoted identifiers. Returns the kind: VACUUM,
--   ANALYZE, CREATE INDEX CONCURRENTLY, REINDEX CONCURRENTLY, REFRESH
--   MATERIALIZED VIEW CONCURRENTLY or CALL. The runner parses the text again
--   with PostgreSQL's own parser (pglast) before it runs it.
-- Errors: 22023 a shape outside the above; 0A000 another kind of statement.
--   Calls: _sql_tokens, _autonomous_refuse_kind
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._autonomous_kind(p_fn text, p_sql text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t    text[] := broker._sql_tokens(p_sql);
    n    integer := pg_catalog.cardinality(t);
    x    text;
    p    integer := 2;  -- REINDEX: where the object kind is (after its options)
    c_hint CONSTANT text := 'An autonomous job is one of: VACUUM ..., ANALYZE ..., CREATE [UNIQUE] INDEX CONCURRENTLY ..., '
                            'REINDEX [(...)] INDEX|TABLE|SCHEMA|DATABASE CONCURRENTLY ..., REFRESH MATERIALIZED VIEW CONCURRENTLY ..., '
                            'CALL ...(...); write it without comments or dollar quoting, with standard string literals '
                            '(no backslashes) and, for names that need it, double quotes.';
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION '%: an autonomous job''s SQL must be at most 100,000 characters with every quote and comment closed', p_fn
            USING ERRCODE = 'invalid_parameter_value', HINT = c_hint;
    END IF;
    IF n OPERATOR(pg_catalog.>) 0 AND t[n] OPERATOR(pg_catalog.=) ';' THEN
        n := n OPERATOR(pg_catalog.-) 1;
        t := t[1:n];
    END IF;
    FOREACH x IN ARRAY t LOOP
        IF x OPERATOR(pg_catalog.=) ANY (ARRAY['--', '$$', 'E''', 'U&"', ';'])
           OR (pg_catalog.length(x) OPERATOR(pg_catalog.=) 1 AND x OPERATOR(pg_catalog.!~) '^[A-Za-z_0-9"''(),.=<>+*/:\[\]-]$'
               AND x OPERATOR(pg_catalog.!~) '^[\u0080-\uFFFF]$') THEN
            RAISE EXCEPTION '%: an autonomous job is one statement without %', p_fn,
                CASE x WHEN '--' THEN 'comments' WHEN '$$' THEN 'dollar quoting or $n parameters'
                       WHEN 'E''' THEN 'escape-string, bit-string or backslash literals' WHEN 'U&"' THEN 'Unicode-escaped names'
                       WHEN ';' THEN 'a second statement (a '';'' before the end)'
                       ELSE pg_catalog.format('the character %L', x) END
                USING ERRCODE = 'invalid_parameter_value', HINT = c_hint;
        END IF;
    END LOOP;
    IF t[1] OPERATOR(pg_catalog.=) 'REINDEX' AND t[2] IS NOT DISTINCT FROM '(' THEN
        p := pg_catalog.array_position(t, ')') OPERATOR(pg_catalog.+) 1;
    END IF;
    RETURN CASE
        WHEN t[1] OPERATOR(pg_catalog.=) 'VACUUM' THEN 'VACUUM'
        WHEN t[1] OPERATOR(pg_catalog.=) ANY (ARRAY['ANALYZE', 'ANALYSE']) THEN 'ANALYZE'
        WHEN t[1] OPERATOR(pg_catalog.=) 'CREATE'
             AND ((t[2] IS NOT DISTINCT FROM 'INDEX' AND t[3] IS NOT DISTINCT FROM 'CONCURRENTLY')
                  OR (t[2] IS NOT DISTINCT FROM 'UNIQUE' AND t[3] IS NOT DISTINCT FROM 'INDEX' AND t[4] IS NOT DISTINCT FROM 'CONCURRENTLY'))
             THEN 'CREATE INDEX CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'REINDEX' AND p IS NOT NULL
             AND t[p] OPERATOR(pg_catalog.=) ANY (ARRAY['INDEX', 'TABLE', 'SCHEMA', 'DATABASE'])
             AND t[p OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM 'CONCURRENTLY'
             THEN 'REINDEX CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'REFRESH' AND t[2:4] OPERATOR(pg_catalog.=) ARRAY['MATERIALIZED', 'VIEW', 'CONCURRENTLY']
             THEN 'REFRESH MATERIALIZED VIEW CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'CALL' THEN 'CALL'
        ELSE broker._autonomous_refuse_kind(p_fn, COALESCE(pg_catalog.array_to_string(t[1:2], ' '), ''), c_hint) END;
END;
$fn$;
COMMENT ON FUNCTION broker._autonomous_kind(text, text) IS
    'Internal: the kind of an autonomous job''s one statement (VACUUM, ANALYZE, CREATE INDEX CONCURRENTLY, REINDEX CONCURRENTLY, REFRESH MATERIALIZED VIEW CONCURRENTLY, CALL); raises 22023/0A000 for anything else.';

-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_refuse_kind(p_fn, p_found, p_hint)
--   Raises 0A000: an autonomous job of another kind of statement.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._autonomous_refuse_kind(p_fn text, p_found text, p_hint text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%: an autonomous job cannot run %', p_fn, pg_catalog.quote_literal(p_found)
        USING ERRCODE = 'feature_not_supported',
              HINT = p_hint OPERATOR(pg_catalog.||) ' Other SQL runs as a regular job (p_autonomous => false).';
END;
$$;
COMMENT ON FUNCTION broker._autonomous_refuse_kind(text, text, text) IS
    'Internal: raise 0A000 for an autonomous job of a statement kind that is not allowed.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_autonomous(p_fn, p_sql, p_language, p_run_as, p_autonomous)
--   The enqueue-time checks of a job's text against how it will run (every
--   enqueue path: broker_add_job, broker_add_jobs, the schedules, and raw
--   INSERTs through the insert policy). A regular job whose text can never
--   run inside a transaction is refused (0A000, the hint names the opt-in);
--   an autonomous job must be SQL, pass _autonomous_kind, and its run_as role
--   must have the administrator's arrangement (42501 with the fix in the
--   hint): set_role for the maintenance statements, login for CALL too.
--   Returns true (it raises otherwise).
--   Calls: _never_in_transaction, _autonomous_kind, _autonomous_via
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_autonomous(p_fn text, p_sql text, p_language text, p_run_as name, p_autonomous boolean)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_kind text;
    v_via  text;
BEGIN
    IF NOT COALESCE(p_autonomous, false) THEN
        v_kind := broker._never_in_transaction(p_sql, p_language);
        IF v_kind IS NOT NULL THEN
            RAISE EXCEPTION '%: % cannot run inside a transaction, and a job runs inside one', p_fn, v_kind
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Enqueue it as an autonomous job: p_autonomous => true (the key "autonomous" in broker_add_jobs), '
                             'once an administrator allowed them for the role (broker.broker_allow_autonomous, docs/jobs.md).';
        END IF;
        RETURN true;
    END IF;
    IF p_language IS DISTINCT FROM 'sql' THEN
        RAISE EXCEPTION '%: an autonomous job is SQL, not %', p_fn, pg_catalog.quote_literal(p_language)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Put PL/pgSQL that commits in a procedure and CALL it.';
    END IF;
    v_kind := broker._autonomous_kind(p_fn, p_sql);
    v_via := broker._autonomous_via(p_run_as);
    IF v_via IS NULL THEN
        RAISE EXCEPTION '%: role % may not run autonomous jobs', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('An administrator allows it per role: for maintenance statements GRANT %1$I TO broker_runtime; '
                                           'SELECT broker.broker_allow_autonomous(%2$L); for CALL too, a login for %1$s in the runner''s '
                                           'autonomous_logins and SELECT broker.broker_allow_autonomous(%2$L, ''login'') (docs/security.md).',
                                           p_run_as, p_run_as);
    END IF;
    IF v_kind OPERATOR(pg_catalog.=) 'CALL' AND v_via OPERATOR(pg_catalog.<>) 'login' THEN
        RAISE EXCEPTION '%: role % may run maintenance statements autonomously, not CALL', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('A CALL runs on a connection that logs in as %1$s: an administrator configures a login for it in '
                                           'the runner''s autonomous_logins, then SELECT broker.broker_allow_autonomous(%2$L, ''login'').',
                                           p_run_as, p_run_as);
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker._check_autonomous(text, text, text, name, boolean) IS
    'Internal: enqueue-time check of a job''s SQL against how it runs (regular jobs: nothing that can never run in a transaction; autonomous: one allowed statement and the role''s arrangement).';

