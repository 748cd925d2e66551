"""NOTIFY is a hint any login may send: a malformed payload on the broker's channel is ignored (and
logged, rate-limited); it never ends the database's session, and wake-ups keep working."""
from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from conftest import add_job, connect
from job_checks import finished, wait_until

BAD_PAYLOADS = ["x", "", "-", "1 2", "1.5", "0x1", "99999999999999999999999999", "\u0661\u0662x", "/", "1/2"]


@pytest.fixture
def stranger(db):
    """A login with no broker role at all (PUBLIC may connect and NOTIFY)."""
    name = f"stranger_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
    yield name
    with connect("postgres") as admin:
        admin.execute(f'DROP ROLE "{name}"')


def _warnings(runner) -> list[dict]:
    lines = [json.loads(line) for line in runner.log().splitlines() if line.startswith("{")]
    return [e for e in lines if e["msg"].startswith("ignored malformed NOTIFY")]


def test_malformed_notify_payloads_are_ignored_and_the_session_stays(db, start, stranger):
    # a one-hour poll timer: after start-up only a NOTIFY can wake a waiting worker
    runner = start(db, extra=("--queue-timer-sec", "3600"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    instance = runner.state()["databases"][0]["instance_id"]
    with connect(db, user=stranger) as attacker:
        for payload in BAD_PAYLOADS * 20:  # 200 malformed hints, sent as fast as possible
            attacker.execute("SELECT pg_notify('pgsql_broker', %s)", (f"{db}/{payload}",))
        attacker.execute("SELECT pg_notify('pgsql_broker', %s)", ("other_database/x",))  # not ours: silent
    runner.wait_for(lambda r: _warnings(r), what="the warning about malformed payloads")
    with connect(db) as conn:
        job = add_job(conn, "after the noise", "SELECT 1")
    # notifications arrive in commit order: the job's wake-up is handled after all 200 bad ones
    wait_until(lambda: finished(db, job), timeout=30, what="the job woken by its NOTIFY")

    state = runner.state()["databases"][0]
    assert (state["role"], state["instance_id"], state["error"]) == ("active", instance, None)
    log = runner.log()
    assert "unexpected error" not in log and "database unavailable" not in log, log[-3000:]
    warnings = _warnings(runner)
    assert 1 <= len(warnings) < 10, warnings  # rate-limited, not one line per payload
    assert warnings[0]["database"] == db and warnings[0]["channel"] == "pgsql_broker"


def test_the_malformed_notify_warning_is_rate_limited(caplog):
    import logging

    from pgsql_broker.observe.logs import RateLimitedWarning
    now = [0.0]
    warn = RateLimitedWarning(logging.getLogger("pgsql_broker.test"), "ignored malformed NOTIFY payload(s)",
                              {"database": "d"}, interval=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="pgsql_broker.test"):
        logged = [warn.hit(payload="x") for _ in range(1000)]
        now[0] = 61.0
        logged.append(warn.hit(payload="y" * 5000))
    assert logged.count(True) == 2 and logged[0] and logged[-1]
    assert caplog.records[1].count == 1000 and len(caplog.records[1].payload) == 200  # 999 held back + this one
