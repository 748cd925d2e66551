"""The run guard compares, before and after each call of jobs, every DEFERRABLE constraint trigger of the
whole database that can run code (broker._deferrable_code, 'oid/rows' strings, each looked up in the array
from before with = ANY: quadratic in their number). Any role may create such triggers on its own tables
(here 30,000, on 300 tables in its executor schema, in a few seconds): every tenant's run then pays seconds
for them (one broker_run took 6.3 s at 20,000 triggers, against 7 ms without), so one tenant slows every other tenant's
jobs by orders of magnitude. The guard's cost must not grow with other roles' catalog entries: it now reads
the triggers of the tables the jobs wrote only. (The wait below is a liveness bound three orders of magnitude
above what the ten runs take, not a measurement.)"""
from __future__ import annotations

import pytest

from conftest import connect
from tenant_logins import enqueue_as, tenant_logins


@pytest.fixture
def logins(db):
    with tenant_logins(db, {"mallory": "evil", "victim": "good"}) as names:
        yield names


def test_other_roles_deferrable_triggers_do_not_slow_a_tenants_runs(db, logins, start):
    with connect(db, user=logins["mallory"]) as conn:
        schema = conn.execute("SELECT split_part(broker.broker_create_executor(current_user)::text, '.', 1)"
                              ).fetchone()[0]
        conn.execute(f"CREATE FUNCTION {schema}.noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'")
        for first in range(0, 300, 20):  # 20 tables a transaction (each holds a lock until its end)
            conn.execute(f"""DO $$ BEGIN
                FOR t IN {first + 1}..{first + 20} LOOP
                    EXECUTE format('CREATE TABLE {schema}.t%s (i integer)', t);
                    FOR k IN 1..100 LOOP
                        EXECUTE format('CREATE CONSTRAINT TRIGGER c%s AFTER INSERT ON {schema}.t%s DEFERRABLE '
                                       'FOR EACH ROW EXECUTE FUNCTION {schema}.noop()', k, t);
                    END LOOP;
                END LOOP; END $$""")
    # jobs with a timeout run one per transaction: one guarded call each
    mates = [enqueue_as(db, logins["victim"], "good", f"mate {i}", "SELECT 1", timeout="1 minute") for i in range(10)]
    runner = start(db, user=logins["runner"], extra=("--queue-count", "1"))
    try:
        with connect(db) as owner:
            runner.wait_for(lambda r: owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) "
                                                    "AND complete_status = 2", (mates,)).fetchone()[0] == len(mates),
                            what="ten jobs of another tenant", timeout=30)
    finally:
        runner.kill()
        with connect(db, user=logins["mallory"]) as conn:  # in steps: DROP OWNED would need 300 locks at once
            for first in range(0, 300, 20):
                conn.execute(f"DO $$ BEGIN FOR t IN {first + 1}..{first + 20} LOOP "
                             f"EXECUTE format('DROP TABLE {schema}.t%s', t); END LOOP; END $$")
