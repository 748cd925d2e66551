"""Jobs failing with huge messages cost the runner a bounded amount: what it keeps, logs and serves of
an error is capped (the extension stores 2,000 characters; the runner keeps at most MAX_ERROR_CHARS
of anything it is handed)."""
from __future__ import annotations

import json

from conftest import add_job, connect
from job_checks import finished, wait_until


def test_huge_error_messages_are_capped_in_the_state_and_the_log(db, start):
    runner = start(db)
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        jobs = [add_job(conn, f"huge error {i}", "BEGIN RAISE EXCEPTION '%', repeat('x', 4000000); END",
                        job_language="plpgsql") for i in range(5)]
    wait_until(lambda: all(finished(db, j) for j in jobs), timeout=60, what="the failing jobs")
    runner.wait_for(lambda r: len(r.state()["databases"][0]["failures"]) == 5, what="the five failures")
    status, body = runner.get("/api/state")
    assert status == 200 and len(body) < 40_000, len(body)
    errors = [f["error"] for f in json.loads(body)["databases"][0]["failures"]]
    assert all(len(e) == 2000 and e.endswith(" [truncated from 4000000 characters]") for e in errors)
    log_lines = runner.log().splitlines()
    failed = [line for line in log_lines if '"job failed"' in line]
    assert len(failed) == 5 and max(len(line) for line in log_lines) < 4000
    with connect(db) as conn:
        stored = conn.execute("SELECT max(length(last_error_message)) FROM broker.broker_jobs").fetchone()[0]
    assert stored == 2000


def test_the_runner_caps_any_text_it_is_handed():
    from pgsql_broker.observe.logs import MAX_ERROR_CHARS, cap_text
    assert cap_text("short") == "short" and cap_text(None) is None
    capped = cap_text("y" * 16_000_000)
    assert capped.startswith("y" * MAX_ERROR_CHARS) and capped.endswith("[truncated by the runner from 16000000 characters]")
    assert len(capped) < MAX_ERROR_CHARS + 100
