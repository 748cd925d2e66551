"""Start and stop real pgbroker-runner processes for the tests."""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def db_dsn(db: str, user: str | None = None) -> str:
    return f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={user or os.environ['PGUSER']}"


class Runner:
    """A pgbroker-runner subprocess on loopback, with its log in a file. It logs in as `user`; without one as
    the test superuser, which the runner only accepts with --allow-privileged-login (passed then)."""

    def __init__(self, *databases: str, log_dir: Path, extra: tuple[str, ...] = (), name: str = "runner",
                 metrics_host: str | None = "127.0.0.1", max_files: int | None = None,
                 log_format: str = "json", user: str | None = None, env: dict[str, str] | None = None):
        """metrics_host None: the runner's default; max_files: its RLIMIT_NOFILE; user None: the
        cluster's superuser, let through with --allow-privileged-login; env: variables added to the process's."""
        self.port = free_port()
        self.log_path = log_dir / f"{name}-{self.port}.log"
        args = [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()"]
        for db in databases:
            args += ["--dsn", db_dsn(db, user)]
        if user is None:
            args.append("--allow-privileged-login")
        args += (["--metrics-host", metrics_host] if metrics_host else []) + [
            "--metrics-port", str(self.port), "--log-format", log_format, "--name", name, *extra]
        self.log_file = self.log_path.open("w")

        def limit_files() -> None:
            if max_files:
                resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))
        self.proc = subprocess.Popen(args, stdout=self.log_file, stderr=subprocess.STDOUT, preexec_fn=limit_files,
                                     env={**os.environ, **(env or {})})

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url(path), timeout=5) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def state(self) -> dict:
        return json.loads(self.get("/api/state")[1])

    def wait_for(self, predicate, timeout: float = 30, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"runner exited ({self.proc.returncode}) waiting for {what}:\n{self.log()}")
            try:
                if predicate(self):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}:\n{self.log()[-4000:]}")

    def role(self, database: str) -> str | None:
        return next((d["role"] for d in self.state()["databases"] if d["database"] == database), None)

    def log(self) -> str:
        self.log_file.flush()
        return self.log_path.read_text()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.log_file.close()
