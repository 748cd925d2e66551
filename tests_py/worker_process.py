"""Real task-worker processes for the tests: `pgsql-broker worker --app app:worker` on an app module written by the
test, logging in as a member of broker_worker."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conftest import connect

# the Worker every test app starts with: a short lease (a heartbeat each second), quick polls, a short stop
WORKER_HEADER = """\
import asyncio, os
from pathlib import Path
from pgsql_broker.tasks import Worker

FLAGS = Path(os.environ["TASK_FLAGS"])
worker = Worker(concurrency=4, lease_seconds=3, poll_seconds=0.5, shutdown_seconds=1)
"""


@contextmanager
def worker_login(db: str, tables: tuple[str, ...] = ()) -> Iterator[str]:
    """A LOGIN role, member of broker_worker, that may write the test's tables; dropped afterwards."""
    name = f"worker_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE broker_worker')
    try:
        with connect(db) as owner:
            for table in tables:
                owner.execute(f'GRANT SELECT, INSERT ON {table} TO "{name}"')
        yield name
    finally:
        with connect(db) as owner:
            owner.execute(f'DROP OWNED BY "{name}"')
        with connect("postgres") as admin:
            admin.execute(f'DROP ROLE "{name}"')


class WorkerProcess:
    """The worker of `app_body` (Python appended to WORKER_HEADER) for database `db` as `user`."""

    def __init__(self, tmp_path: Path, db: str, user: str, app_body: str, name: str = "app",
                 tenant: str | None = None):
        self.dir = tmp_path / f"{name}_{uuid.uuid4().hex[:6]}"
        self.dir.mkdir()
        self.flags = self.dir / "flags"
        self.flags.mkdir()
        (self.dir / "app.py").write_text(WORKER_HEADER + textwrap.dedent(app_body))
        self.log_path = self.dir / "worker.log"
        dsn = f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={user}"
        env = {**os.environ, "TASK_FLAGS": str(self.flags)}
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from pgsql_broker.cli import main; main()", "worker", "--app", "app:worker",
             "--dsn", dsn, "--log-format", "text", *(("--tenant", tenant) if tenant else ())],
            cwd=self.dir, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_flag(self, name: str, timeout: float = 60) -> None:
        """Until the app touched FLAGS/name (a handler says how far it got)."""
        deadline = time.monotonic() + timeout
        while not (self.flags / name).exists():
            assert self.proc.poll() is None, "the worker exited:\n" + self.log_path.read_text()
            assert time.monotonic() < deadline, f"no flag {name} within {timeout} s:\n" + self.log_path.read_text()
            time.sleep(0.05)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.log.close()
