"""Outages are logged when they start and when they end: after three server restarts (-m immediate, 2 s
down each), the runner's log has, in order, three times a warning at the outage's start and an info line at
its end that gives the outage's length in seconds. (Each outage is told, not only the first of a process.)"""
from __future__ import annotations

import time

from drain import DB, log_lines, runner_login, tcp_cluster, wait  # noqa: F401 (the fixtures)

# The runner's log lines these tests expect (the stalled-network test reads OUTAGE_START too):
OUTAGE_START = "database unavailable"       # level warning: a message starting so, once at an outage's start
OUTAGE_END = "database available again"     # level info: a message starting so, once at the outage's end ...
OUTAGE_SECONDS = "outage_seconds"           # ... with this field: the outage's length in seconds (a number)

RESTARTS = 3


def instance(runner) -> int | None:
    """The runner's instance id while it is active (a new one after each outage)."""
    database = next(d for d in runner.state()["databases"] if d["database"] == DB)
    return database["instance_id"] if database["role"] == "active" else None


def outage_lines(runner) -> list[dict]:
    return [e for e in log_lines(runner) if e["msg"].startswith((OUTAGE_START, OUTAGE_END))]


def test_outages_are_logged_when_they_start_and_end(tcp_cluster, runner_login, start):  # noqa: F811 (the fixtures)
    runner = start(extra=("--dsn", tcp_cluster.tcp_dsn(DB, runner_login), "--notify-retry-seconds", "5"),
                   user=runner_login, name="outages")
    wait(lambda: instance(runner) is not None, 60, "the runner to be active", runner)
    for n in range(1, RESTARTS + 1):
        before = instance(runner)
        tcp_cluster.restart("immediate", down_seconds=2)
        wait(lambda: instance(runner) not in (None, before), 90, f"the runner to serve again after restart {n}",
             runner)
    # (the end of the last outage may be logged just after the runner is active again; without it the
    # assertions below say what is missing)
    deadline = time.monotonic() + 10
    while sum(e["msg"].startswith(OUTAGE_END) for e in outage_lines(runner)) < RESTARTS and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = outage_lines(runner)
    told = [(e["level"], OUTAGE_START if e["msg"].startswith(OUTAGE_START) else OUTAGE_END) for e in lines]
    assert told == [("warning", OUTAGE_START), ("info", OUTAGE_END)] * RESTARTS, (
        f"expected each of the {RESTARTS} outages logged at its start and its end, got: {lines}")
    for end in (e for e in lines if e["msg"].startswith(OUTAGE_END)):
        seconds = end.get(OUTAGE_SECONDS)
        assert isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0, end
