"""A task worker says at its start what it serves: the database, the tenant and the task names. A worker of the
wrong tenant claims nothing and fails nothing, so this line is where its operator sees the mistake (docs/tasks.md)."""
from __future__ import annotations

import signal

from job_checks import wait_until
from worker_process import WorkerProcess, worker_login

APP = """
@worker.task("send_receipt")
async def send_receipt(args, ctx):
    return None

@worker.task("resize_image")
async def resize_image(args, ctx):
    return None
"""


def ready_line(worker: WorkerProcess) -> str:
    lines = [line for line in worker.log_path.read_text().splitlines() if "task worker ready" in line]
    return lines[0] if lines else ""


def test_a_worker_names_its_database_tenant_and_tasks_when_it_starts(db, tmp_path):
    with worker_login(db) as login:
        for tenant, shown in ((None, "default"), ("acme", "acme")):
            worker = WorkerProcess(tmp_path, db, login, APP, tenant=tenant)
            try:
                wait_until(lambda: ready_line(worker) or worker.proc.poll() is not None, timeout=60,
                           what="the worker's start line")
                line = ready_line(worker)
                assert line, "no start line:\n" + worker.log_path.read_text()
                assert f"database={db}" in line
                assert f"tenant={shown}" in line
                assert "tasks=resize_image,send_receipt" in line
                worker.signal(signal.SIGTERM)
                assert worker.wait_exit() == 0
            finally:
                worker.kill()


def test_a_worker_whose_login_could_escape_its_grants_says_so(db, tmp_path):
    """Its handlers write in ctx.conn with the login's rights: a superuser's (or BYPASSRLS, broker_admin...) is
    named as the runner names it, once, at the start; a login that is only a member of broker_worker is not."""
    with worker_login(db) as login:
        for user, unsafe in (("postgres", True), (login, False)):
            worker = WorkerProcess(tmp_path, db, user, APP)
            try:
                wait_until(lambda: ready_line(worker) or worker.proc.poll() is not None, timeout=60,
                           what="the worker's start line")
                worker.signal(signal.SIGTERM)
                assert worker.wait_exit() == 0
                text = worker.log_path.read_text()
                warnings = [line for line in text.splitlines() if "UNSAFE" in line]
                if unsafe:
                    assert len(warnings) == 1, text
                    assert "login postgres" in warnings[0] and "postgres (superuser" in warnings[0], warnings[0]
                    assert "broker_worker" in warnings[0]
                else:
                    assert warnings == [], text
            finally:
                worker.kill()
