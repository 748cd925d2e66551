"""The README's quick start, run literally against the cluster of `make test`.

The code blocks between `<!-- quickstart -->` and `<!-- /quickstart -->` in README.md are run in
order, from the repository's root, with the PG* variables of the test cluster (as a reader's
shell would have them after the install steps above the markers):

- a ```sh block runs with `bash -e`; one preceded by `<!-- quickstart: background -->` is a
  long-running command (the runner, which the reader starts in a second terminal): it is started
  in the background and, at the end, stopped with SIGINT as Ctrl-C would, and must exit 0;
- a ```text block right after a ```sh block is the output the README promises: the command is
  run again (the runner needs a moment to run the job) until its output holds every line of it,
  whitespace aside, or the deadline passes.

psql reads a psqlrc that sets ON_ERROR_STOP, so that a failing statement fails its block. The
runner gets PGBROKER_METRICS_HOST/PORT (127.0.0.1, any free port) in its environment, so that it
does not collide with another process on the machine's port 9469; the README's commands are not
changed.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEADLINE_SEC = 60
BLOCK = re.compile(r"(?:<!-- quickstart: (?P<mark>[a-z]+) -->\s*\n)?```(?P<lang>[a-z]*)\n(?P<body>.*?)^```\s*$",
                   re.S | re.M)


def quickstart_blocks(text: str) -> list[dict]:
    """The code blocks between the quick start markers: language, body, mark (background) and expected output."""
    start, end = text.find("<!-- quickstart -->"), text.find("<!-- /quickstart -->")
    assert 0 <= start < end, "README.md lacks the <!-- quickstart --> ... <!-- /quickstart --> markers"
    blocks: list[dict] = []
    for m in BLOCK.finditer(text[start:end]):
        if m["lang"] == "text":
            assert blocks and blocks[-1]["lang"] == "sh", "a ```text block must follow a ```sh block"
            blocks[-1]["expect"] = m["body"]
        else:
            assert m["lang"] == "sh", f"quick start blocks are sh (or text for output), not {m['lang']!r}"
            blocks.append({"lang": m["lang"], "body": m["body"], "mark": m["mark"], "expect": None})
    return blocks


def database_names(blocks: list[dict]) -> set[str]:
    return {name for b in blocks for name in re.findall(r"\bcreatedb\s+(\w+)", b["body"])}


def normalized(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def test_quickstart_blocks_are_found():
    blocks = quickstart_blocks(README.read_text())
    assert any(b["mark"] == "background" for b in blocks), "the quick start must start a runner"
    assert any(b["expect"] for b in blocks), "the quick start must show what the reader will see"
    assert database_names(blocks), "the quick start must create its own database"


def test_readme_quickstart_runs_a_job(tmp_path):
    if not os.environ.get("PGHOST"):
        pytest.exit("PG* variables are not set: run the tests through `make test`", returncode=2)
    blocks = quickstart_blocks(README.read_text())
    names = database_names(blocks)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        taken = [r[0] for r in admin.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)",
                                              (list(names),))]
    assert not taken, f"database(s) {taken} already exist on this server: the quick start needs a fresh one"

    psqlrc = tmp_path / "psqlrc"
    psqlrc.write_text("\\set ON_ERROR_STOP on\n")
    env = dict(os.environ, PSQLRC=str(psqlrc), PGBROKER_METRICS_HOST="127.0.0.1", PGBROKER_METRICS_PORT="0")
    background: list[tuple[subprocess.Popen, Path]] = []
    try:
        for i, block in enumerate(blocks):
            if block["mark"] == "background":
                log = tmp_path / f"background-{i}.log"
                with log.open("w") as out:
                    proc = subprocess.Popen(["bash", "-e", "-c", block["body"]], cwd=ROOT, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                background.append((proc, log))
                continue
            deadline = time.monotonic() + DEADLINE_SEC
            while True:
                result = subprocess.run(["bash", "-e", "-c", block["body"]], cwd=ROOT, env=env,
                                        capture_output=True, text=True, timeout=DEADLINE_SEC)
                for proc, log in background:
                    assert proc.poll() is None, f"the runner exited ({proc.returncode}):\n{log.read_text()}"
                missing = ([] if block["expect"] is None else
                           [line for line in normalized(block["expect"]) if line not in normalized(result.stdout)])
                if result.returncode == 0 and not missing:
                    break
                if result.returncode != 0 or time.monotonic() > deadline:
                    logs = "\n".join(log.read_text()[-3000:] for _, log in background)
                    raise AssertionError(f"quick start block {i} failed (exit {result.returncode}):\n{block['body']}\n"
                                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
                                         f"missing output lines: {missing}\nrunner log:\n{logs}")
                time.sleep(0.2)
        for proc, log in background:  # Ctrl-C in the runner's terminal
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(DEADLINE_SEC) == 0, log.read_text()
    finally:
        for proc, _ in background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        with psycopg.connect(dbname="postgres", autocommit=True) as admin:
            for name in names - set(taken):
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
