"""Tasks from any language (issue 37): a real `node` process runs tasks through plain SQL.

tests_js/task_worker.js (node-postgres and nothing else, installed into tests_js/node_modules by
`make test`) connects as a broker_worker login mapped to tenant a under strict tenancy, LISTENs on
pgsql_broker_task and follows the protocol of docs/tasks.md: claim, one heartbeat, the task's write
and its completion in one transaction, a failure with a retry (its write rolled back), the tasks it
claimed and will not run handed back. An enqueue login of tenant a enqueues the tasks, and a SQL job
that waits on one of them: the DAG crosses languages.

Nothing here reads the clock: the retry backoff is set to 0, the worker's poll to a minute (so that
its wake-up after the last enqueue is the NOTIFY's), and every wait is bounded by DEADLINE_SEC,
past which the test fails.
"""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import connect
from tenant_logins import tenant_logins

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests_js" / "task_worker.js"
DOCS = ROOT / "docs" / "tasks.md"
DEADLINE_SEC = 60
TASK = "send_receipt"


def node() -> str:
    path = shutil.which("node")
    if path is None or not (ROOT / "tests_js" / "node_modules" / "pg").is_dir():
        pytest.fail("node and tests_js/node_modules are needed: `make test` installs them "
                    "(or `make tests_js/node_modules/.installed`)")
    return path


class Worker:
    """tests_js/task_worker.js as a real process; its stdout is one JSON event a line."""

    def __init__(self, db: str, login: str, count: int):
        env = {**os.environ, "PGDATABASE": db, "PGUSER": login}
        self.proc = subprocess.Popen([node(), str(SCRIPT), "--tenant", "a", "--count", str(count),
                                      "--poll-ms", str(DEADLINE_SEC * 1000), TASK],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def until(self, kind: str) -> list[dict]:
        """The events up to and including the first `kind`; fails past the deadline or at the end."""
        got: list[dict] = []
        while True:
            try:
                event = self.events.get(timeout=DEADLINE_SEC)
            except queue.Empty:
                pytest.fail(f"no {kind!r} event from the worker within {DEADLINE_SEC} s; so far: {got}")
            if event is None:
                pytest.fail(f"the worker ended before a {kind!r} event: {got}, stderr: {self.proc.stderr.read()}")
            got.append(event)
            self.seen.append(event)
            if event["event"] == kind:
                return got

    def finish(self) -> list[dict]:
        """The events up to its exit, which must be 0 within the deadline."""
        events = self.until("done")
        try:
            rc = self.proc.wait(timeout=DEADLINE_SEC)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not exit within {DEADLINE_SEC} s after it was done")
        assert rc == 0, self.proc.stderr.read()
        return events

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE_SEC)


def add_task(db: str, login: str, n: int, priority: int, **args) -> int:
    """broker_add_task as the enqueue login, for tenant a, in a transaction of its own."""
    with connect(db, user=login, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant('a')")
        job = conn.execute("SELECT job_id FROM broker.broker_add_task(%s, %s::jsonb, p_priority => %s, "
                           "p_max_attempts => 2)", (TASK, json.dumps({"n": n, **args}), priority)).fetchone()[0]
        conn.commit()
        return job


def claimable_sql_jobs(db: str) -> list[int]:
    """What a runner's claim of queue 1 takes now (it claims them: call it last, or when it must be empty)."""
    with connect(db) as owner:
        return [r[0] for r in owner.execute("SELECT job_id FROM broker.broker_get(1, NULL, 60, 10)")]


def test_a_node_worker_completes_tasks_through_plain_sql(db):
    with tenant_logins(db, {"shop": "a"}, runtime=(), workers={"mailer": "a"}) as names:
        with connect(db) as owner:
            owner.execute("CREATE TABLE task_effects (job_id bigint NOT NULL, n integer NOT NULL, "
                          "attempt integer NOT NULL, written_by text NOT NULL DEFAULT current_user)")
            owner.execute(f'GRANT INSERT ON task_effects TO "{names["mailer"]}"')
            owner.execute("SELECT broker.broker_set('retry_base_seconds', '0')")   # (the backoff, handed over)
        # priority orders the claim: receipts 1 to 5, receipt 2 fails on its first attempt
        tasks = {n: add_task(db, names["shop"], n, 10 - n, **({"fail_first": True} if n == 2 else {}))
                 for n in range(1, 6)}
        with connect(db, user=names["shop"], autocommit=False) as conn:
            conn.execute("SELECT broker.broker_set_tenant('a')")
            load = conn.execute("SELECT job_id FROM broker.broker_add_job('load receipts', 'SELECT 1', "
                                "p_depends_on_job_ids => ARRAY[%s]::bigint[])", (tasks[5],)).fetchone()[0]
            conn.commit()
        assert claimable_sql_jobs(db) == [], "the SQL job waits on the task"

        # first run: two completions; receipt 2 fails and is retried, 4 and 5 are handed back
        first = Worker(db, names["mailer"], count=2)
        try:
            events = first.finish()
        finally:
            first.kill()
        by_job = {v: k for k, v in tasks.items()}
        assert [(e["event"], by_job.get(int(e.get("job_id", 0)))) for e in events if "job_id" in e] == [
            ("completed", 1), ("failed", 2), ("completed", 3), ("released", 4), ("released", 5)]
        assert all(e["recorded"] for e in events if e["event"] in ("failed", "released"))
        with connect(db) as owner:
            states = dict(owner.execute("SELECT job_id, (complete_status, attempts, interruptions)::text "
                                        "FROM broker.broker_jobs WHERE job_id = ANY(%s)", (list(tasks.values()),)))
            assert {by_job[j]: s for j, s in states.items()} == {
                1: "(2,1,0)", 2: "(0,1,0)", 3: "(2,1,0)", 4: "(0,0,1)", 5: "(0,0,1)"}, \
                "receipt 2 pending for its retry; 4 and 5 pending, their attempts not counted"
            assert sorted(owner.execute("SELECT n FROM task_effects").fetchall()) == [(1,), (3,)], \
                "the failed attempt's write was rolled back"
        assert claimable_sql_jobs(db) == []

        # second run: the retry and the handed-back tasks, then a task enqueued while it waits
        second = Worker(db, names["mailer"], count=4)
        try:
            before = second.until("idle")
            assert [(e["event"], by_job[int(e["job_id"])], e["attempt"]) for e in before if "job_id" in e] == [
                ("completed", 2, 2), ("completed", 4, 1), ("completed", 5, 1)]
            tasks[6] = add_task(db, names["shop"], 6, 0)
            by_job[tasks[6]] = 6
            after = second.finish()
        finally:
            second.kill()
        with connect(db) as owner:
            task_queue = owner.execute("SELECT job_queue FROM broker.broker_task_queue WHERE task_name = %s",
                                       (TASK,)).fetchone()[0]
        assert {"event": "woken", "payload": f"{db}/{task_queue}"} in after, \
            "the NOTIFY woke the worker (its poll is longer than the test's deadline)"
        assert [(e["event"], by_job[int(e["job_id"])]) for e in after if "job_id" in e] == [("completed", 6)]

        with connect(db) as owner:
            states = dict(owner.execute("SELECT job_id, complete_status FROM broker.broker_jobs WHERE job_id = ANY(%s)",
                                        (list(tasks.values()),)))
            assert {by_job[j]: s for j, s in states.items()} == {n: 2 for n in range(1, 7)}, "every task completed"
            effects = owner.execute("SELECT n, job_id, attempt, written_by FROM task_effects ORDER BY n").fetchall()
            assert effects == [(n, tasks[n], 2 if n == 2 else 1, names["mailer"]) for n in range(1, 7)], \
                "exactly one row per task, written by the worker's login"
            attempts = owner.execute("SELECT attempt, outcome, error_sqlstate, error_message FROM broker.broker_job_attempts "
                                     "WHERE job_id = %s ORDER BY attempt_id", (tasks[2],)).fetchall()
            assert attempts == [(1, "failed", "38000", "receipt 2: the mail server said 451, try again later"),
                                (2, "completed", None, None)]
            outputs = dict(owner.execute("SELECT job_id, output::jsonb FROM broker.broker_job_attempts "
                                         "WHERE job_id = ANY(%s) AND outcome = 'completed'", (list(tasks.values()),)))
            assert {by_job[j]: o for j, o in outputs.items()} == {
                n: {"n": n, "attempt": 2 if n == 2 else 1, "heartbeat": "extended"} for n in range(1, 7)}, \
                "each completion recorded its output"
        assert claimable_sql_jobs(db) == [load], "the SQL job that waited on a task is claimable"


def test_the_docs_show_the_worker_as_it_is():
    """docs/tasks.md's ```js blocks are excerpts of tests_js/task_worker.js, word for word."""
    blocks = re.findall(r"^```js\n(.*?)^```$", DOCS.read_text(), re.S | re.M)
    assert len(blocks) >= 6, "docs/tasks.md shows the worker's steps"
    script = SCRIPT.read_text()
    assert [b for b in blocks if b not in script] == [], "a block of docs/tasks.md differs from tests_js/task_worker.js"
