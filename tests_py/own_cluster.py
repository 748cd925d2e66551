"""A PostgreSQL cluster of a test's own (socket only, like .ci/with-cluster's, or also TCP on 127.0.0.1 for a
proxy to front), for settings the shared one does not have (say max_connections = 40), and for faults the
shared one must not suffer (restarts, pg_hba.conf rejects). PGBIN names the server's binaries (.ci/with-cluster
exports it)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

ROLES_SQL = (Path(__file__).resolve().parent.parent / "sql" / "roles.sql").read_text()


class OwnCluster:
    def __init__(self, max_connections: int, port: int, tcp: bool = False, extra_conf: str = ""):
        """tcp: also listen on 127.0.0.1:port (loopback only, never beyond), so a proxy can front it; extra_conf:
        more lines of postgresql.conf (shared_preload_libraries = 'pg_cron', ...)."""
        self.bin = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
        self.dir = Path(tempfile.mkdtemp(prefix="pgsql_broker_own_cluster."))
        self.dir.chmod(0o755)
        self.port = port
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._as_owner([self.bin / "initdb", "-D", self.dir / "data", "--auth=trust", "-U", "postgres", "-E", "UTF8",
                        "--locale=C.UTF-8"])
        with open(self.dir / "data" / "postgresql.conf", "a") as conf:
            conf.write(f"listen_addresses = '{'127.0.0.1' if tcp else ''}'\n"
                       f"unix_socket_directories = '{self.dir}'\nport = {port}\n"
                       f"max_connections = {max_connections}\nfsync = off\nlog_min_messages = warning\n{extra_conf}\n")
        self._hba = (self.dir / "data" / "pg_hba.conf").read_text()
        self._start()

    def _start(self) -> None:
        self._as_owner([self.bin / "pg_ctl", "-D", self.dir / "data", "-l", self.dir / "server.log", "-w", "-t", "60",
                        "start"])

    def _as_owner(self, args: list) -> None:
        args = [str(a) for a in args]
        if os.getuid() == 0:
            args = ["runuser", "-u", "postgres", "--", *args]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, timeout=120)

    def dsn(self, db: str) -> str:
        return f"dbname={db} host={self.dir} port={self.port} user=postgres"

    def connect(self, db: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(db), autocommit=True)

    def tcp_dsn(self, db: str, user: str = "postgres", port: int | None = None, **options: str) -> str:
        """A DSN over TCP to 127.0.0.1 (port: another one in front of the server, a proxy's); options are more
        libpq settings (keepalives_idle=2, ...)."""
        extra = "".join(f" {key}={value}" for key, value in options.items())
        return f"dbname={db} host=127.0.0.1 port={port or self.port} user={user}{extra}"

    def restart(self, mode: str = "immediate", down_seconds: float = 2) -> None:
        """Stop the server (pg_ctl -m immediate: every backend dies at once, as in a crash; -m fast: sessions
        are ended cleanly), keep it down down_seconds, and start it again (returns once it accepts logins)."""
        assert mode in ("immediate", "fast"), mode
        self._as_owner([self.bin / "pg_ctl", "-D", self.dir / "data", "-m", mode, "-w", "-t", "60", "stop"])
        time.sleep(down_seconds)
        self._start()

    def hba_reject(self, user: str) -> None:
        """pg_hba.conf rejects new logins of `user` (over TCP and the socket); its sessions stay. pg_ctl reload."""
        (self.dir / "data" / "pg_hba.conf").write_text(
            f'host all "{user}" 127.0.0.1/32 reject\nlocal all "{user}" reject\n' + self._hba)
        self._reload()

    def hba_restore(self) -> None:
        (self.dir / "data" / "pg_hba.conf").write_text(self._hba)
        self._reload()

    def authenticate(self, hba: str, ident: str = "") -> None:
        """Replace pg_hba.conf (and pg_ident.conf) and reload: logins from then on are checked by these lines."""
        (self.dir / "data" / "pg_ident.conf").write_text(ident)
        (self.dir / "data" / "pg_hba.conf").write_text(hba)
        self._reload()

    def _reload(self) -> None:
        self._as_owner([self.bin / "pg_ctl", "-D", self.dir / "data", "reload"])

    def databases_with_broker(self, count: int) -> list[str]:
        """`count` databases with the extension and the broker roles, named d00, d01, ..."""
        with self.connect("postgres") as admin:
            admin.execute("CREATE DATABASE broker_template")
        with self.connect("broker_template") as conn:
            conn.execute("CREATE EXTENSION pgsql_broker")
            conn.execute(ROLES_SQL)
        names = [f"d{i:02d}" for i in range(count)]
        with self.connect("postgres") as admin:
            for name in names:
                admin.execute(f'CREATE DATABASE "{name}" TEMPLATE broker_template')
                # database privileges are not copied from the template (roles.sql grants this per database)
                admin.execute(f'GRANT CREATE ON DATABASE "{name}" TO broker_admin')
        return names

    def stop(self) -> None:
        try:
            self._as_owner([self.bin / "pg_ctl", "-D", self.dir / "data", "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
