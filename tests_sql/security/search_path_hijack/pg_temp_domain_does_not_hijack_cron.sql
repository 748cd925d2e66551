-- The cron functions (no SET search_path) do not pick up a pg_temp.text domain as their variables' type.
-- (The first cron call of this session happens inside the trap.)
BEGIN;
SELECT plan(1);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE TEMP TABLE trap_result (step pg_catalog.text, outcome pg_catalog.text);
GRANT INSERT, SELECT ON trap_result TO broker_test_mallory;

SET LOCAL ROLE broker_test_mallory;
CREATE FUNCTION pg_temp.trap(v pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'trap ran as %', current_user; END $$;
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.trap(VALUE));
DO $$
DECLARE v_res pg_catalog.text;
BEGIN
    BEGIN
        v_res := broker.broker_cron_next('*/5 1-3 * jan-mar mon', '2025-01-01 00:00Z')::pg_catalog.text;
        INSERT INTO trap_result VALUES ('cron_next', v_res);
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO trap_result VALUES ('cron_next', SQLERRM);
    END;
    BEGIN
        PERFORM broker._cron_parse('@daily');
        INSERT INTO trap_result VALUES ('parse macro', 'ok');
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO trap_result VALUES ('parse macro', SQLERRM);
    END;
END $$;
DROP DOMAIN pg_temp.text;
RESET ROLE;
SELECT results_eq($$SELECT step, outcome FROM trap_result ORDER BY step$$,
    $$VALUES ('cron_next'::pg_catalog.text, '2025-01-06 01:00:00+00'::pg_catalog.text), ('parse macro', 'ok')$$,
    'a pg_temp.text domain does not hijack the cron functions');

SELECT * FROM finish();
ROLLBACK;
