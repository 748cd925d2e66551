"""The release a user pins (issue 34): `python -m build` makes an sdist and, from it, a wheel; the wheel
installed into a new virtual environment (its dependencies from the package index, as `pip install` gives
a user) installs the broker into a new database and runs a job, with nothing imported from this tree.

The wheel is built the way a release is (isolated, sdist first, the wheel from the sdist), so a file that
the sdist loses is missing from the wheel too. The schema is installed with --no-extension, so that it
comes from the wheel's scripts and not from the server's extension directory (which `make install` filled
from this tree); --with-roles runs the wheel's roles.sql, --verify-only reads its catalog.json, and the
runner's HTTP port serves its console files.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

import pytest

from conftest import add_job, connect, dsn
from job_checks import wait_until
from pgsql_broker.install.scripts import migration_chain
from pgsql_broker.states import JobState
from runner_process import free_port

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runner" / "pgsql_broker"
# What the installer and the runner read from the package besides its modules (pyproject.toml's package-data);
# extension/, roles.sql and pgsql_broker.control are links in the tree, so their contents are what must ship.
DATA = [*(f"extension/{p.name}" for p in sorted((PACKAGE / "extension").glob("*.sql"))), "roles.sql",
        "pgsql_broker.control", "catalog.json", "observe/console.html", "observe/console.js", "observe/console.css"]
# what the copy of the tree leaves out: version control, environments, caches and earlier builds (.gitignore)
BY_PRODUCTS = (".git", ".venv", ".venv-*", "node_modules", ".node", "__pycache__", ".pytest_cache", "*.egg-info",
               "build", "dist", "site")


def run(args: list, cwd: Path, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL, **kwargs)
    assert result.returncode == 0, f"{args} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def user_env() -> dict:
    """The environment of a user's shell: the cluster's PG* variables, nothing that points Python at this tree
    or at the test venv, and no PGBROKER_* setting of the caller's."""
    return {k: v for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"} and not k.startswith("PGBROKER_")}


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the built wheel, the bin/ of a venv it is installed in, the sdist), once per session."""
    # Built from a copy of the tree without its by-products: the sdist would read a runner/*.egg-info left by an
    # earlier build or `pip install -e` as its file list, and so ship a file that package-data no longer names.
    # (The copy also keeps the build from writing into the tree.) Links stay links, as in a checkout.
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*BY_PRODUCTS))
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=dist)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    venv = tmp_path_factory.mktemp("venv")
    # no pip of its own (ensurepip alone takes seconds): the test venv's pip installs into it, which gives
    # the same environment as `venv/bin/pip install` would
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv)
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--disable-pip-version-check",
         wheels[0]], cwd=venv, env=user_env())
    return wheels[0], venv / "bin", sdists[0]


def test_the_sdist_carries_every_script_as_a_file(wheel_venv):
    """The sdist a release publishes holds the package data as files (the tree's links resolved), so a wheel
    built from it anywhere has them: every full and upgrade script, roles.sql, the control file, the catalog."""
    _, _, sdist = wheel_venv
    assert any(f.startswith("extension/pgsql_broker--") and f.count("--") == 2 for f in DATA), DATA  # upgrades too
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        members = {m.name: m for m in archive.getmembers()}
        missing = [f for f in DATA if f"{top}/runner/pgsql_broker/{f}" not in members]
        assert missing == [], f"the sdist lacks {missing}"
        links = [f for f in DATA if not members[f"{top}/runner/pgsql_broker/{f}"].isfile()]
        assert links == [], f"the sdist has {links} as links, not files"
        differ = [f for f in DATA if archive.extractfile(f"{top}/runner/pgsql_broker/{f}").read() != (PACKAGE / f).read_bytes()]
        assert differ == [], f"the sdist's copies of {differ} differ from the tree's files"


def test_the_wheel_installs_the_broker_and_runs_a_job(wheel_venv, empty_db, tmp_path):
    wheel, bin_dir, _ = wheel_venv
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [f for f in DATA if f"pgsql_broker/{f}" not in names]
        assert missing == [], f"the wheel lacks {missing}"
        differ = [f for f in DATA if archive.read(f"pgsql_broker/{f}") != (PACKAGE / f).read_bytes()]
        assert differ == [], f"the wheel's copies of {differ} differ from the tree's files"

    env = user_env()
    where = run([bin_dir / "python", "-c", "import pgsql_broker; print(pgsql_broker.__file__)"], tmp_path, env=env)
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout  # the venv's copy, not the tree's
    # the installed package finds the whole migration chain in its own files (0.1.0, then each upgrade)
    chain = run([bin_dir / "python", "-c", "from pgsql_broker.install.scripts import migration_chain; "
                 "print(' '.join(s.name for s in migration_chain()))"], tmp_path, env=env)
    assert chain.stdout.split() == [s.name for s in migration_chain()], chain.stdout

    cli = bin_dir / "pgsql-broker"
    # the admin password --with-roles asks for without a terminal (the test cluster trusts its logins)
    installed = run([cli, "install", "--dsn", dsn(empty_db), "--no-extension", "--with-roles"], tmp_path,
                    env={"PG_PASS": "unused-with-trust", **env})
    verified = run([cli, "install", "--verify-only", "--dsn", dsn(empty_db)], tmp_path, env=env)
    assert "OK: up to date" in verified.stdout, installed.stdout + verified.stdout
    with connect(empty_db) as conn:
        # every version from the wheel's scripts, none by CREATE EXTENSION from the server's files
        assert conn.execute("SELECT DISTINCT install_path FROM broker.broker_schema_migrations").fetchall() == [
            ("migrations",)]
        conn.execute("CREATE TABLE effects (n int)")
        job = add_job(conn, "from the wheel", "INSERT INTO effects VALUES (34)")

    port = free_port()
    log_path = tmp_path / "runner.log"
    with log_path.open("w") as log:
        # the test's login is the cluster's superuser, which the runner only accepts when told to
        runner = subprocess.Popen([bin_dir / "pgbroker-runner", "--dsn", dsn(empty_db), "--allow-privileged-login",
                                   "--metrics-host", "127.0.0.1", "--metrics-port", str(port), "--log-format", "json"],
                                  cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        def done() -> bool:
            assert runner.poll() is None, f"the runner exited ({runner.returncode}):\n{log_path.read_text()[-3000:]}"
            with connect(empty_db) as conn:
                return conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                    (job,)).fetchone()[0] == JobState.COMPLETED
        wait_until(done, 120, "the job to complete")
        with connect(empty_db) as conn:
            assert conn.execute("SELECT n FROM effects").fetchall() == [(34,)]
        for path, name in (("/", "console.html"), ("/console.js", "console.js"), ("/console.css", "console.css")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
                assert response.read() == (PACKAGE / "observe" / name).read_bytes(), path
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(120) == 0, log_path.read_text()[-3000:]
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
