"""A real PgBouncer (Debian's /usr/sbin/pgbouncer) in front of the test cluster, for the pooler tests.

It listens on a free 127.0.0.1 port, reaches the cluster over its unix socket, and authenticates clients
against the cluster itself: auth_query reads the SCRAM secret from pg_shadow (as auth_user, the cluster's
superuser, which the socket trusts), so a test login only needs a password (`password_for`). As root it runs
as the cluster's OS user (PgBouncer refuses root), from a temporary directory of its own.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from conftest import connect
from runner_process import free_port

PGBOUNCER = "/usr/sbin/pgbouncer"


def password_for(role: str) -> str:
    return f"pw-{role}"


def give_passwords(*roles: str) -> None:
    """LOGIN roles of the cluster get the password PgBouncer's clients use (password_for)."""
    with connect("postgres") as admin:
        for role in roles:
            admin.execute(f"ALTER ROLE \"{role}\" PASSWORD '{password_for(role)}'")


class PgBouncer:
    """One PgBouncer process. `databases`: alias -> (database, pool_mode); `settings`: more [pgbouncer] lines."""

    def __init__(self, databases: dict[str, tuple[str, str]], **settings):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="pgbouncer."))
        self.dir.chmod(0o755)
        host, port = os.environ["PGHOST"], os.environ["PGPORT"]
        lines = ["[databases]"]
        for alias, (dbname, mode) in databases.items():
            lines.append(f"{alias} = host={host} port={port} dbname={dbname} pool_mode={mode}")
        options = {"listen_addr": "127.0.0.1", "listen_port": self.port, "unix_socket_dir": "",
                   "auth_type": "scram-sha-256", "auth_file": self.dir / "userlist.txt",
                   "auth_user": os.environ["PGUSER"],
                   "auth_query": "SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = $1",
                   "logfile": self.dir / "pgbouncer.log", "pidfile": self.dir / "pgbouncer.pid",
                   "default_pool_size": 10, "max_client_conn": 200, **settings}
        lines.append("[pgbouncer]")
        lines += [f"{k} = {v}" for k, v in options.items()]
        (self.dir / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        (self.dir / "userlist.txt").write_text(f'"{os.environ["PGUSER"]}" ""\n')  # the socket trusts it
        command = [PGBOUNCER, str(self.dir / "pgbouncer.ini")]
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres")
            for f in self.dir.iterdir():
                shutil.chown(f, "postgres")
            command = ["runuser", "-u", "postgres", "--", *command]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.proc.returncode}):\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on 127.0.0.1:{self.port}:\n{self.log()}")

    def dsn(self, alias: str, user: str) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={alias} user={user} password={password_for(user)}"

    def connect(self, alias: str, user: str, **kwargs) -> psycopg.Connection:
        """A psycopg connection through PgBouncer, configured as docs/poolers.md says for 1.18."""
        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("prepare_threshold", None)
        return psycopg.connect(self.dsn(alias, user), **kwargs)

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # SIGINT: PgBouncer's safe shutdown, closing server connections
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def pgbouncer():
    """Start PgBouncers: pgbouncer({alias: (database, pool_mode)}, **settings); stopped after the test."""
    started: list[PgBouncer] = []

    def _start(databases: dict[str, tuple[str, str]], **settings) -> PgBouncer:
        bouncer = PgBouncer(databases, **settings)
        started.append(bouncer)
        return bouncer
    yield _start
    for bouncer in started:
        bouncer.stop()
