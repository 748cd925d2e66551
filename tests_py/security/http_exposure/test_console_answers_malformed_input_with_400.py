"""Odd input to the console's API gets a 400 that says what is wrong, never a 500 or a dropped connection: a NUL
character in a filter, a tenant or a schedule's name (PostgreSQL text cannot hold one: psycopg refused it before
the database saw it, and the console answered 500 with the driver's message), and an action's body nested too
deep for the JSON parser (4 KB of '[': a RecursionError escaped the handler, and the client got no answer), and a
Content-Length of digits that are not ASCII ('²' passed str.isdigit, then int() failed: no answer either). An action
whose database is not a string is refused, not carried out in the runner's first database."""
from __future__ import annotations

import json
import socket

from pgsql_broker.observe import web
from pgsql_broker.observe.console import ConsoleDatabase
from pgsql_broker.observe.console_api import ConsoleAPI
from pgsql_broker.observe.metrics import Metrics
from runner_process import db_dsn

TOKEN = "s3cret-console-token-0123456789"
HEADERS = {"Content-Type": "application/json", "Host": "127.0.0.1:1", "Authorization": "Bearer " + TOKEN}


def test_nul_characters_and_deep_json_are_refused_with_400(db):
    console = ConsoleAPI([ConsoleDatabase("d", db_dsn(db), None, "test")], TOKEN)
    for target in ("/api/jobs?name=a%00b", "/api/jobs?tenant=%00", "/api/schedules?tenant=a%00",
                   "/api/jobs/1?tenant=%00", "/api/jobs/1/graph?tenant=%00"):
        reply = console.handle("GET", target, HEADERS)
        assert reply.status == 400 and "NUL" in json.loads(reply.body)["error"], (target, reply.body)
    for target, body in (("/api/schedules/a%00b/run-now", b"{}"), ("/api/jobs/1/cancel", b'{"tenant": "a\\u0000"}'),
                         ("/api/jobs/bulk/cancel", b'{"filters": {"state": "pending", "name": "\\u0000"}, "expect": 1}'),
                         ("/api/jobs/1/cancel", b"[" * 4000), ("/api/jobs/1/cancel", b'{"database": ["d2"]}')):
        reply = console.handle("POST", target, HEADERS, body)
        assert reply.status == 400, (target, reply.status, reply.body)


def test_a_content_length_of_other_digits_is_answered():
    console = ConsoleAPI([ConsoleDatabase("d", "dbname=d host=/nonexistent", None, "test")], TOKEN)
    server = web.serve("127.0.0.1", 0, Metrics(), lambda: {"running": True, "databases": []}, console=console)
    try:
        with socket.create_connection(server.server_address, timeout=10) as s:
            s.sendall(b"POST /api/jobs/1/cancel HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: \xb2\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.split(b" ", 2)[1] == b"413", data[:200]
    finally:
        server.shutdown()
        server.server_close()
