-- Temporary objects one job leaves in the runner's session do not capture the next jobs' names.
BEGIN;
SELECT plan(3);

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT USAGE ON SCHEMA public TO broker_test_mallory, broker_test_alice;
CREATE TABLE public.orders (id int, note text);
GRANT INSERT, SELECT ON public.orders TO broker_test_alice;
CREATE TABLE public.loot (what text);
GRANT INSERT ON public.loot TO PUBLIC;

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('evil');
SELECT broker.broker_add_job('plant', $job$
CREATE TEMP TABLE orders (id int, note text);
GRANT ALL ON pg_temp.orders TO PUBLIC;
CREATE FUNCTION pg_temp.spy() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN INSERT INTO public.loot VALUES (current_user || ': ' || NEW.note); RETURN NEW; END $f$;
CREATE TRIGGER spy BEFORE INSERT ON pg_temp.orders FOR EACH ROW EXECUTE FUNCTION pg_temp.spy();
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_catalog.length(VALUE) < 0);
$job$, 1, 100);
RESET ROLE;
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_job('order', $$INSERT INTO orders VALUES (1, 'secret order')$$);
SELECT broker.broker_add_job('typed', $$INSERT INTO orders VALUES (2, 'typed'::text)$$);
RESET ROLE;
CREATE TABLE public.f1 AS
SELECT g.job_name, r.complete_status, r.error_message
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
-- a runner resets its session between jobs (DISCARD ALL); here, where pgTAP keeps its own
-- state in temporary tables, drop just the planted objects (they would hijack pgTAP too)
DROP TABLE pg_temp.orders;
DROP DOMAIN pg_temp.text;
DROP FUNCTION pg_temp.spy();
SELECT is((SELECT complete_status FROM public.f1 WHERE job_name = 'plant'), 2::smallint, 'the planting job itself ran');
SELECT is((SELECT array_agg(note ORDER BY id) FROM public.orders), ARRAY['secret order', 'typed'],
          'the next jobs wrote to public.orders, not to the planted temp table');
SELECT is((SELECT count(*) FROM public.loot), 0::bigint, 'the planted trigger never fired');

SELECT * FROM finish();
ROLLBACK;
