"""A PostgreSQL cluster of a test's own (socket only, like .ci/with-cluster's), for settings the shared one does not
have (say max_connections = 40). PGBIN names the server's binaries (.ci/with-cluster exports it)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg

ROLES_SQL = (Path(__file__).resolve().parent.parent / "sql" / "roles.sql").read_text()


class OwnCluster:
    def __init__(self, max_connections: int, port: int):
        self.bin = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
        self.dir = Path(tempfile.mkdtemp(prefix="pgsql_broker_own_cluster."))
        self.dir.chmod(0o755)
        self.port = port
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._as_owner([self.bin / "initdb", "-D", self.dir / "data", "--auth=trust", "-U", "postgres", "-E", "UTF8",
                        "--locale=C.UTF-8"])
        with open(self.dir / "data" / "postgresql.conf", "a") as conf:
            conf.write(f"listen_addresses = ''\nunix_socket_directories = '{self.dir}'\nport = {port}\n"
                       f"max_connections = {max_connections}\nfsync = off\nlog_min_messages = warning\n")
        self._as_owner([self.bin / "pg_ctl", "-D", self.dir / "data", "-l", self.dir / "server.log", "-w", "start"])

    def _as_owner(self, args: list) -> None:
        args = [str(a) for a in args]
        if os.getuid() == 0:
            args = ["runuser", "-u", "postgres", "--", *args]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, timeout=120)

    def dsn(self, db: str) -> str:
        return f"dbname={db} host={self.dir} port={self.port} user=postgres"

    def connect(self, db: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(db), autocommit=True)

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
