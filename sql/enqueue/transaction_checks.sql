-- sql/enqueue/transaction_checks.sql: the lexer of job SQL and the refusal of regular jobs that can never run in a transaction.
-- ---------------------------------------------------------------------------
-- Function: broker._sql_tokens(p_sql)
--   A lexer for the enqueue-time checks of job SQL (SQL has no parser to
--   call). Returns the tokens of p_sql in order: words and keywords
--   upper-cased, a quoted identifier as '"', a standard string literal as
--   '''', a number as '0', each other character as itself, and markers for
--   what the autonomous check refuses: '--' (a comment of either kind),
--   '$$' (a dollar quote or a $n parameter), 'E''' (a string with a prefix
--   such as E, U&, B or X, or with a backslash), 'U&"' (a Unicode
--   identifier). Comments and dollar quotes are skipped over whole (nested
--   block comments too), so what follows them is lexed as PostgreSQL would.
--   NULL for an unterminated quote or comment, or a text over 100,000
--   characters: the callers then refuse nothing they cannot be sure of.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._sql_tokens(p_sql text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c      text[];
    n      integer;
    i      integer := 1;
    j      integer;
    depth  integer;
    tag    text;
    word   text;
    toks   text[] := ARRAY[]::text[];
BEGIN
    IF p_sql IS NULL OR pg_catalog.length(p_sql) OPERATOR(pg_catalog.>) 100000 THEN
        RETURN NULL;
    END IF;
    c := pg_catalog.regexp_split_to_array(p_sql, '');  -- (indexing an array is O(1), substr on text is not)
    n := pg_catalog.cardinality(c);
    WHILE i OPERATOR(pg_catalog.<=) n LOOP
        IF c[i] OPERATOR(pg_catalog.~) '^\s$' THEN
            i := i OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '-' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '-' THEN
            toks := toks OPERATOR(pg_catalog.||) '--'::text;
            WHILE i OPERATOR(pg_catalog.<=) n AND c[i] OPERATOR(pg_catalog.<>) E'\n' AND c[i] OPERATOR(pg_catalog.<>) E'\r' LOOP
                i := i OPERATOR(pg_catalog.+) 1;
            END LOOP;
        ELSIF c[i] OPERATOR(pg_catalog.=) '/' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '*' THEN
            toks := toks OPERATOR(pg_catalog.||) '--'::text;
            depth := 1;
            i := i OPERATOR(pg_catalog.+) 2;
            WHILE depth OPERATOR(pg_catalog.>) 0 LOOP
                IF i OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[i] OPERATOR(pg_catalog.=) '/' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '*' THEN
                    depth := depth OPERATOR(pg_catalog.+) 1;
                    i := i OPERATOR(pg_catalog.+) 2;
                ELSIF c[i] OPERATOR(pg_catalog.=) '*' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '/' THEN
                    depth := depth OPERATOR(pg_catalog.-) 1;
                    i := i OPERATOR(pg_catalog.+) 2;
                ELSE
                    i := i OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
        ELSIF c[i] OPERATOR(pg_catalog.=) '''' THEN
            -- a standard string; a backslash in it is refused (its meaning depends on settings)
            j := i OPERATOR(pg_catalog.+) 1;
            tag := '''';
            LOOP
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[j] OPERATOR(pg_catalog.=) '''' AND c[j OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '''' THEN
                    j := j OPERATOR(pg_catalog.+) 2;
                ELSIF c[j] OPERATOR(pg_catalog.=) '''' THEN
                    EXIT;
                ELSE
                    IF c[j] OPERATOR(pg_catalog.=) E'\\' THEN
                        tag := 'E''';
                    END IF;
                    j := j OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) tag;
            i := j OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '"' THEN
            j := i OPERATOR(pg_catalog.+) 1;
            LOOP
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[j] OPERATOR(pg_catalog.=) '"' AND c[j OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '"' THEN
                    j := j OPERATOR(pg_catalog.+) 2;
                ELSIF c[j] OPERATOR(pg_catalog.=) '"' THEN
                    EXIT;
                ELSE
                    j := j OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '"'::text;
            i := j OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '$' THEN
            -- $n, or a dollar quote $tag$ ... $tag$ (skipped whole)
            j := i OPERATOR(pg_catalog.+) 1;
            WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.~) '^[A-Za-z0-9_]$' LOOP
                j := j OPERATOR(pg_catalog.+) 1;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '$$'::text;
            IF j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.=) '$'
               AND (j OPERATOR(pg_catalog.=) (i OPERATOR(pg_catalog.+) 1) OR c[i OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.!~) '^[0-9]$') THEN
                tag := pg_catalog.array_to_string(c[i:j], '');
                j := pg_catalog.strpos(pg_catalog.array_to_string(c[j OPERATOR(pg_catalog.+) 1:n], ''), tag);
                IF j OPERATOR(pg_catalog.=) 0 THEN
                    RETURN NULL;
                END IF;
                i := i OPERATOR(pg_catalog.+) pg_catalog.length(tag) OPERATOR(pg_catalog.+) j OPERATOR(pg_catalog.-) 1
                     OPERATOR(pg_catalog.+) pg_catalog.length(tag);
            ELSE
                i := j;
            END IF;
        ELSIF c[i] OPERATOR(pg_catalog.~) '^[A-Za-z_\u0080-\uFFFF]$' THEN
            j := i;
            WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.~) '^[A-Za-z0-9_$\u0080-\uFFFF]$' LOOP
                j := j OPERATOR(pg_catalog.+) 1;
            END LOOP;
            word := pg_catalog.upper(pg_catalog.array_to_string(c[i:j OPERATOR(pg_catalog.-) 1], ''));
            IF j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.=) '''' THEN
                -- E'...', B'...', X'...', N'...': skipped whatever escapes it uses (the autonomous check refuses it)
                toks := toks OPERATOR(pg_catalog.||) 'E'''::text;
                j := j OPERATOR(pg_catalog.+) 1;
                WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.<>) '''' LOOP
                    IF c[j] OPERATOR(pg_catalog.=) E'\\' THEN
                        j := j OPERATOR(pg_catalog.+) 1;
                    END IF;
                    j := j OPERATOR(pg_catalog.+) 1;
                END LOOP;
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                END IF;
                i := j OPERATOR(pg_catalog.+) 1;
            ELSIF word OPERATOR(pg_catalog.=) 'U' AND c[j] IS NOT DISTINCT FROM '&' THEN
                RETURN toks OPERATOR(pg_catalog.||) 'U&"'::text;  -- refused; nothing after it matters
            ELSE
                toks := toks OPERATOR(pg_catalog.||) word;
                i := j;
            END IF;
        ELSIF c[i] OPERATOR(pg_catalog.~) '^[0-9]$' THEN
            WHILE i OPERATOR(pg_catalog.<=) n AND c[i] OPERATOR(pg_catalog.~) '^[0-9.]$' LOOP
                i := i OPERATOR(pg_catalog.+) 1;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '0'::text;
        ELSE
            toks := toks OPERATOR(pg_catalog.||) c[i];
            i := i OPERATOR(pg_catalog.+) 1;
        END IF;
    END LOOP;
    RETURN toks;
END;
$fn$;
COMMENT ON FUNCTION broker._sql_tokens(text) IS
    'Internal: the tokens of job SQL for the enqueue-time checks (words upper-cased, literals and identifiers as markers, comments and dollar quotes as refusal markers); NULL when unsure.';

-- ---------------------------------------------------------------------------
-- Function: broker._transaction_words()
--   A regular expression (case-insensitive) that every text
--   _never_in_transaction refuses matches: one of its statement words at the
--   start of the text or after a ';' (comments between allowed), or COMMIT /
--   ROLLBACK after a PL/pgSQL BEGIN, THEN, ELSE or LOOP. Texts it does not
--   match need no lexing; broker_add_jobs matches each element once. BEGIN
--   and END are left out (every PL/pgSQL body has them): a transaction block
--   that one of them opens or ends alone is left to fail at run time.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._transaction_words()
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE  -- (PL/pgSQL: a SQL function with SET is planned at every call)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '(^|;)\s*((/\*.*?\*/|--[^\n]*)\s*)*(vacuum|commit|rollback|abort|start|savepoint|release|prepare|create|drop|alter|cluster|reindex)\M'
           '|\m(begin|then|else|loop)\s+(commit|rollback)\M';
END;
$$;
COMMENT ON FUNCTION broker._transaction_words() IS
    'Internal: a regular expression matched by every job text that can never run inside a transaction (a quick filter before lexing).';

-- ---------------------------------------------------------------------------
-- Function: broker._transaction_keywords()
--   A regular expression (case-insensitive) for the words that start the
--   statements _never_in_transaction refuses, each as a whole word: every
--   text it refuses matches (a refused statement's first token is one of
--   them, and a token is a whole word), and a text with none of them needs
--   no further look.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._transaction_keywords()
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE  -- (PL/pgSQL: a SQL function with SET is planned at every call)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '\m(vacuum|commit|rollback|abort|begin|end|start|savepoint|release|prepare|create|drop|alter|cluster|reindex)\M';
END;
$$;
COMMENT ON FUNCTION broker._transaction_keywords() IS
    'Internal: a regular expression of the words that start a statement that can never run inside a transaction (the first quick filter).';

-- ---------------------------------------------------------------------------
-- Function: broker._may_not_run_in_transaction(p_sql)
--   The quick filter before lexing: true for every text
--   _never_in_transaction refuses (and for some it accepts), false for the
--   others, which need no lexing: _transaction_keywords, then
--   _transaction_words. The word test is what most texts stop at, a
--   fraction of the cost of _transaction_words' expression (its lazy comment
--   group is slow to match).
--   SQL without SET search_path on purpose: inlined into the enqueue
--   functions' queries and expressions; every operator is schema-qualified.
--   Calls: _transaction_keywords, _transaction_words
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._may_not_run_in_transaction(p_sql text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_sql OPERATOR(pg_catalog.~*) broker._transaction_keywords()
           AND p_sql OPERATOR(pg_catalog.~*) broker._transaction_words()
$$;
COMMENT ON FUNCTION broker._may_not_run_in_transaction(text) IS
    'Internal: the quick filter before lexing a job''s text: true for every text that can never run inside a transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._never_in_transaction(p_sql, p_language)
--   The statement of a job's text that can never run inside a transaction
--   (and so never inside the job executor), e.g. 'VACUUM' or 'COMMIT', or
--   NULL. Only what is certain: a statement hidden in EXECUTE or behind a
--   text this lexer gives up on is left to fail at run time. A quick regular
--   expression first, so that ordinary jobs pay one match.
--   Calls: _may_not_run_in_transaction, _sql_tokens
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._never_in_transaction(p_sql text, p_language text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t      text[];
    s      text[];
    i      integer;
    k      integer;
    v_p    integer;
    v_o    integer;
    v_conc boolean;
    prev   text;
    v_plpg boolean := p_language OPERATOR(pg_catalog.=) 'plpgsql';
BEGIN
    IF NOT COALESCE(broker._may_not_run_in_transaction(p_sql), false) THEN
        RETURN NULL;
    END IF;
    t := broker._sql_tokens(p_sql);
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_plpg THEN
        -- PL/pgSQL: a COMMIT or ROLLBACK statement (at a statement start) fails in any function
        FOR i IN 1 .. pg_catalog.cardinality(t) LOOP
            prev := CASE WHEN i OPERATOR(pg_catalog.>) 1 THEN t[i OPERATOR(pg_catalog.-) 1] ELSE ';' END;
            IF t[i] OPERATOR(pg_catalog.=) ANY (ARRAY['COMMIT', 'ROLLBACK'])
               AND prev OPERATOR(pg_catalog.=) ANY (ARRAY[';', 'BEGIN', 'THEN', 'ELSE', 'LOOP']) THEN
                RETURN t[i];
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    k := 1;
    FOR i IN 1 .. pg_catalog.cardinality(t) OPERATOR(pg_catalog.+) 1 LOOP
        IF i OPERATOR(pg_catalog.>) pg_catalog.cardinality(t) OR t[i] OPERATOR(pg_catalog.=) ';' THEN
            s := t[k:i OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.||) ARRAY[NULL, NULL, NULL, NULL, NULL]::text[];
            k := i OPERATOR(pg_catalog.+) 1;
            s := ARRAY(SELECT x FROM pg_catalog.unnest(s) WITH ORDINALITY AS u(x, o) WHERE x IS DISTINCT FROM '--' ORDER BY o);
            IF s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['VACUUM', 'COMMIT', 'ROLLBACK', 'ABORT', 'BEGIN', 'END', 'SAVEPOINT', 'RELEASE'])
               OR (s[1] OPERATOR(pg_catalog.=) 'START' AND s[2] IS NOT DISTINCT FROM 'TRANSACTION')
               OR (s[1] OPERATOR(pg_catalog.=) 'PREPARE' AND s[2] IS NOT DISTINCT FROM 'TRANSACTION')
               OR (s[1] OPERATOR(pg_catalog.=) 'CLUSTER' AND s[2] IS NULL)
               OR (s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['CREATE', 'DROP']) AND s[2] OPERATOR(pg_catalog.=) ANY (ARRAY['DATABASE', 'TABLESPACE']))
               OR (s[1] OPERATOR(pg_catalog.=) 'ALTER' AND s[2] IS NOT DISTINCT FROM 'SYSTEM') THEN
                RETURN pg_catalog.concat_ws(' ', s[1], CASE WHEN s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['START', 'PREPARE', 'CREATE', 'DROP', 'ALTER']) THEN s[2] END);
            ELSIF s[1] OPERATOR(pg_catalog.=) 'CREATE' AND 'INDEX' OPERATOR(pg_catalog.=) ANY (s[2:3])
                  AND 'CONCURRENTLY' OPERATOR(pg_catalog.=) ANY (s[3:4]) THEN
                RETURN 'CREATE INDEX CONCURRENTLY';
            ELSIF s[1] OPERATOR(pg_catalog.=) 'DROP' AND s[2] IS NOT DISTINCT FROM 'INDEX' AND s[3] IS NOT DISTINCT FROM 'CONCURRENTLY' THEN
                RETURN 'DROP INDEX CONCURRENTLY';
            ELSIF s[1] OPERATOR(pg_catalog.=) 'REINDEX' THEN
                -- REINDEX [(options)] kind [CONCURRENTLY] name: the kind after the options, CONCURRENTLY
                -- after the kind or as an option without a value or with a true one
                v_p := 2;
                v_conc := false;
                IF s[2] IS NOT DISTINCT FROM '(' THEN
                    v_p := pg_catalog.array_position(s, ')') OPERATOR(pg_catalog.+) 1;
                    FOR v_o IN 3 .. COALESCE(v_p OPERATOR(pg_catalog.-) 2, 0) LOOP
                        v_conc := v_conc OR (s[v_o] OPERATOR(pg_catalog.=) 'CONCURRENTLY'
                                         AND s[v_o OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.=) ANY (ARRAY[',', ')', 'TRUE', 'ON']));
                    END LOOP;
                END IF;
                v_conc := v_conc OR s[v_p OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM 'CONCURRENTLY';
                IF s[v_p] OPERATOR(pg_catalog.=) ANY (ARRAY['INDEX', 'TABLE', 'SCHEMA', 'DATABASE', 'SYSTEM'])
                   AND (v_conc OR s[v_p] OPERATOR(pg_catalog.=) ANY (ARRAY['SCHEMA', 'DATABASE', 'SYSTEM'])) THEN
                    RETURN 'REINDEX ' OPERATOR(pg_catalog.||) s[v_p] OPERATOR(pg_catalog.||) CASE WHEN v_conc THEN ' CONCURRENTLY' ELSE '' END;
                END IF;
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._never_in_transaction(text, text) IS
    'Internal: the statement of a job''s text that can never run inside a transaction (VACUUM, COMMIT, CREATE INDEX CONCURRENTLY, ...), or NULL.';
