"""Job names, error messages and tenant ids are the enqueuer's text: the runner's text log and
`pgsql-broker status` print them with control characters escaped, so they can neither forge a line
nor send escape sequences to the operator's terminal."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import add_job, connect
from runner_process import db_dsn
from job_checks import finished, wait_until

FORGED = "2026-01-01 00:00:00,000 info    job completed database=prod job_id=1"
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (debug|info|warning|error) |    \| )")


def test_the_text_log_escapes_job_names_and_errors(db, start):
    runner = start(db, log_format="text")
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    with connect(db) as conn:
        job = add_job(conn, f"nightly\n{FORGED}\x1b[2J\u202e",
                      "BEGIN RAISE EXCEPTION '%', 'boom' || chr(27) || ']0;owned' || chr(7) || chr(13) || chr(10) || "
                      f"'{FORGED}'; END", job_language="plpgsql")
        ok = add_job(conn, "fine\x1b[31m red", "SELECT 1")
    wait_until(lambda: finished(db, job) and finished(db, ok), what="both jobs")
    runner.wait_for(lambda r: "job failed" in r.log(), what="the failure logged")
    log = runner.log()
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f\u202e]", log), "a control character reached the log"
    assert all(LINE.match(line) for line in log.splitlines()), log
    assert not any(line.startswith(FORGED) for line in log.splitlines())
    assert "\\x1b]0;owned\\x07\\r\\n" + FORGED in log and '"fine\\x1b[31m red"' in log


def test_status_escapes_tenant_ids_and_schedule_names(db):
    with connect(db, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant(%s)", ("acme\x1b]0;owned\x07\nFORGED tenant",))
        add_job(conn, "j", "SELECT 1")
        conn.commit()
    with connect(db) as conn:
        conn.execute("SELECT * FROM broker.broker_add_schedule(%s, '0 3 * * *', 'SELECT 1')",
                     ("report\x1b[2J\nFORGED schedule",))
    out = subprocess.run([sys.executable, "-m", "pgsql_broker", "status", "--dsn", db_dsn(db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f]", out.stdout), out.stdout
    assert not any(line.startswith("FORGED") for line in out.stdout.splitlines())
    assert "report\\x1b[2J\\nFORGED schedule" in out.stdout and "acme\\x1b]0;owne" in out.stdout


def test_safe_text_escapes_controls_separators_and_bidi_overrides():
    from pgsql_broker.observe.logs import safe_text
    assert safe_text("a\nb\rc\td\x1be\x9bf\u2028g\u202eh\x7f") == "a\\nb\\rc\\td\\x1be\\x9bf\\u2028g\\u202eh\\x7f"
    assert safe_text("plain text, ünïcode ✓") == "plain text, ünïcode ✓"
