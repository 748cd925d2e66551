"""A schedule's name is one path segment of its action (POST /api/schedules/<name>/pause), percent-encoded as the
page's encodeURIComponent does: a name with '/', a literal '%2F', '..', spaces or other scripts reaches that
schedule and no other, and a raw '/' in the path reaches no route."""
from __future__ import annotations

import json
from urllib.parse import quote

from conftest import connect
from pgsql_broker.observe.console import ConsoleDatabase
from pgsql_broker.observe.console_api import ConsoleAPI
from runner_process import db_dsn

TOKEN = "s3cret-console-token-0123456789"
HEADERS = {"Content-Type": "application/json", "Host": "127.0.0.1:1", "Authorization": "Bearer " + TOKEN}
NAMES = ["nightly/eu", "100%2F", "..", "a b", "ünïcode ✓", "x/../y"]


def test_each_name_reaches_its_own_schedule(db):
    with connect(db) as conn:
        for name in NAMES + ["nightly", "eu", "y"]:
            conn.execute("SELECT broker.broker_add_schedule(%s, '0 3 * * *', 'SELECT 1')", (name,))
    console = ConsoleAPI([ConsoleDatabase("d", db_dsn(db), None, "test")], TOKEN)
    for name in NAMES:
        reply = console.handle("POST", f"/api/schedules/{quote(name, safe='')}/pause", HEADERS, b"{}")
        assert reply.status == 200 and json.loads(reply.body)["target"] == name, (name, reply.body)
    assert console.handle("POST", "/api/schedules/nightly/eu/pause", HEADERS, b"{}").status == 404
    with connect(db) as conn:
        paused = {r[0] for r in conn.execute("SELECT schedule_name FROM broker.broker_schedule WHERE NOT enabled")}
    assert paused == set(NAMES)
