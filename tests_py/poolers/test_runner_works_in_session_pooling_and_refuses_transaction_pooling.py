"""The runner's session connection behind a real PgBouncer (docs/poolers.md): through a session-pooling
alias whose name differs from the database it works like a direct connection, NOTIFY wake-ups included;
through transaction pooling it refuses at start, before it takes the instance lock; and an instance lock
left behind on a pooled server connection (by a runner of an older version, or by hand) is evicted by a
standby once its instance stopped pinging, so that it cannot keep every later runner standing by."""
from __future__ import annotations

import re

from conftest import add_job, connect
from pgbouncer import give_passwords, pgbouncer  # noqa: F401 (the fixture)
from tenant_logins import tenant_logins
from job_checks import finished, wait_until

LOCK = ("SELECT pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = %s "
        "AND l.locktype = 'advisory' AND l.classid = 1651665664 AND l.objid = 0 AND l.granted")


def _first_round_done(db: str) -> bool:
    with connect(db) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name LIKE "
                                 "'%%:listen' AND state = 'idle' AND query LIKE '%%broker_ping_instance%%'",
                                 (db,)).fetchone()[0])


def _claims(runner, database: str, queue: int) -> float:
    """How many claims the worker of `queue` has made (broker_claim_duration_seconds_count)."""
    text = runner.get("/metrics")[1].decode()
    found = re.search(r'^broker_claim_duration_seconds_count\{database="%s",queue="%d"\} (\S+)$'
                      % (re.escape(database), queue), text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_session_pooling_alias_gets_its_wake_ups_from_notify(db, pgbouncer, start):
    with tenant_logins(db, {}, strict=False) as names:
        login = names["runner"]
        give_passwords(login)
        bouncer = pgbouncer({"broker_alias": (db, "session")})
        # the poll timer is an hour: a job can only start before it because a NOTIFY woke its worker
        runner = start(extra=("--dsn", bouncer.dsn("broker_alias", login), "--queue-count", "2",
                              "--queue-timer-sec", "3600"), user=login)
        runner.wait_for(lambda r: r.role("broker_alias") == "active", what="active through the alias")
        # the session connection's first round of timers (the poll first, the ping last) has run: from then
        # on only a NOTIFY can start a job before the hour is up
        wait_until(lambda: _first_round_done(db), what="the session connection's first poll")
        with connect(db) as owner:
            job = add_job(owner, "woken", "SELECT 1", job_queue=2)
        wait_until(lambda: finished(db, job), what="the job woken by its NOTIFY")
        assert runner.proc.poll() is None


def test_transaction_pooling_is_refused_at_start_without_taking_the_lock(db, pgbouncer, start):
    with tenant_logins(db, {}, strict=False) as names:
        login = names["runner"]
        give_passwords(login)
        bouncer = pgbouncer({"broker_tx": (db, "transaction")})
        runner = start(extra=("--dsn", bouncer.dsn("broker_tx", login)), user=login, name="pooled")
        assert runner.wait(60) == 1
        errors = [line for line in runner.log().splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "pool_mode = session" in errors[0], runner.log()
        assert "Traceback" not in runner.log()
        with connect(db) as owner:
            assert owner.execute(LOCK, (db,)).fetchall() == []
            assert owner.execute("SELECT count(*) FROM broker.broker_queueinstance").fetchone()[0] == 0
        direct = start(db, user=login, name="direct")
        direct.wait_for(lambda r: r.role(db) == "active", what="a direct runner active after the refusal")


def test_a_lock_left_on_a_pooled_server_connection_is_evicted_once_its_instance_stops_pinging(
        db, pgbouncer, start):
    with tenant_logins(db, {}, strict=False) as names:
        login = names["runner"]
        give_passwords(login)
        bouncer = pgbouncer({"broker_tx": (db, "transaction")})
        # what a runner through transaction pooling used to do: register, then go away; the session lock
        # stays on the server connection, which PgBouncer keeps in its pool
        with bouncer.connect("broker_tx", login) as client:
            instance = client.execute("SELECT broker.broker_register_instance('old-runner')").fetchone()[0]
        with connect(db) as owner:
            holder = owner.execute(LOCK, (db,)).fetchone()[0]
            owner.execute("UPDATE broker.broker_queueinstance SET last_ping_at = now() - interval '1 hour' "
                          "WHERE instance_id = %s", (instance,))
        runner = start(db, user=login)
        runner.wait_for(lambda r: r.role(db) == "active", what="the standby evicting the stale holder")
        with connect(db) as owner:
            assert owner.execute(LOCK, (db,)).fetchone()[0] != holder
            assert owner.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (holder,)).fetchone()[0] == 0
        assert f'"holder_pid": {holder}' in runner.log()
