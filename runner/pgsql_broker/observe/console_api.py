"""The console's HTTP API (JSON) and its static page; observe/web.py serves it, observe/console.py does the reads
and the actions.

Authentication: a bearer token (broker.console_token, PGBROKER_CONSOLE_TOKEN; at least 16 characters,
settings.py checks it; there is no default), compared in constant time. The page keeps it in the tab's sessionStorage and
sends it as `Authorization: Bearer ...` on each fetch(); it is never a cookie, so no other site can make a
browser send it (a cross-origin request with an Authorization header needs a CORS preflight, which this server
never grants). Hence CSRF-safe without a CSRF token: actions are POST only, need the header, a JSON body, and
an Origin, when a browser sends one, equal to the page's own.

Without a token configured the console is read-only: actions answer 403 and job SQL is never sent. With one,
a request without it (or with a wrong one) gets 401 for actions and job SQL, and the rest read-only.
"""
from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from urllib.parse import parse_qsl, unquote, urlsplit

from ..settings import console_users
from .console import ConsoleDatabase, ConsoleError, Filters, tenant_of

MAX_BODY_BYTES = 4096
STATIC = {"/": ("console.html", "text/html; charset=utf-8"), "/index.html": ("console.html", "text/html; charset=utf-8"),
          "/console.js": ("console.js", "text/javascript; charset=utf-8"),
          "/console.css": ("console.css", "text/css; charset=utf-8")}
# what the page may load and do: its own script, style and API, nothing inline, never framed
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cross-Origin-Resource-Policy": "same-origin",
}
_JOB = re.compile(r"^/api/jobs/([0-9]{1,18})$")
_JOB_GRAPH = re.compile(r"^/api/jobs/([0-9]{1,18})/graph$")
_JOB_ACTION = re.compile(r"^/api/jobs/([0-9]{1,18})/(cancel|retry)$")
_QUEUE_ACTION = re.compile(r"^/api/queues/([0-9]{1,4})/(pause|resume)$")
_BULK_ACTION = re.compile(r"^/api/jobs/bulk/(cancel|retry)$")
_SCHEDULE_ACTION = re.compile(r"^/api/schedules/([^/]{1,600})/(run-now|pause|resume)$")   # (the name URL-encoded)


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, value: object, **headers: str) -> Reply:
    return Reply(status, "application/json", json.dumps(value, default=str).encode(), headers)


def _error(exc: ConsoleError) -> Reply:
    headers = {"WWW-Authenticate": 'Bearer realm="pgsql_broker console"'} if exc.status == 401 else {}
    return _json(exc.status, {"error": str(exc)}, **headers)


class ConsoleAPI:
    """Routes of the console: GET pages and reads, POST actions."""

    def __init__(self, databases: list[ConsoleDatabase], token: str = ""):
        """token: the setting broker.console_token: a token, or NAME:TOKEN pairs (settings.console_users)."""
        self.databases = {db.name: db for db in databases}
        self._users = [(t.encode(), name) for t, name in (console_users(token) if token else {}).items()]
        self._token = bool(self._users)
        self._pages = {path: (resources.files(__package__) / name).read_bytes() for path, (name, _) in STATIC.items()}

    def serves(self, path: str) -> bool:
        return path in STATIC or path.startswith("/api/") and path != "/api/state"

    def authenticated(self, authorization: str | None) -> bool:
        """True for a configured token; raises 401 for a wrong one, so the page notices it."""
        return self.user(authorization) is not None

    def user(self, authorization: str | None) -> str | None:
        """The console account whose token the request carries (None without one); 401 for a wrong one. Every
        token is compared (in constant time each), so the answer's time does not tell which one came close."""
        if authorization is None:
            return None
        scheme, _, value = authorization.partition(" ")
        given = value.strip().encode("utf-8", "surrogateescape")
        found = None
        for token, name in self._users:
            if hmac.compare_digest(given, token) and scheme.lower() == "bearer":
                found = name
        if found is None:
            raise ConsoleError(401, "wrong console token" if self._token else "no console token is configured")
        return found

    def handle(self, method: str, target: str, headers, body: bytes | None = None) -> Reply:
        url = urlsplit(target)
        try:
            if method == "GET" and url.path in STATIC:
                return Reply(200, STATIC[url.path][1], self._pages[url.path], dict(SECURITY_HEADERS))
            if method == "GET":
                return self._get(url.path, dict(parse_qsl(url.query)), headers)
            if method == "POST":
                return self._post(url.path, headers, body or b"")
            raise ConsoleError(405, "GET or POST only")
        except ConsoleError as exc:
            return _error(exc)

    def _database(self, name: str | None) -> ConsoleDatabase:
        if not name:
            return next(iter(self.databases.values()))
        if name not in self.databases:
            raise ConsoleError(404, "no such database in this runner")
        return self.databases[name]

    def _get(self, path: str, query: dict[str, str], headers) -> Reply:
        authenticated = self.authenticated(headers.get("Authorization"))
        if path == "/api/session":
            return _json(200, {"token_configured": bool(self._token), "authenticated": authenticated,
                               "user": self.user(headers.get("Authorization")) if authenticated else None,
                               "databases": list(self.databases)})
        db = self._database(query.get("database"))
        if path == "/api/jobs":
            return _json(200, {"database": db.name, **db.jobs(Filters.parse(query))})
        if path == "/api/queues":
            return _json(200, {"database": db.name, **db.queues()})
        if path == "/api/flow":
            return _json(200, {"database": db.name, **db.flow()})
        if path == "/api/charts":
            return _json(200, {"database": db.name, **db.charts()})
        if path == "/api/schedules":
            return _json(200, {"database": db.name, "schedules": db.schedules(tenant_of(query.get("tenant")))})
        if match := _JOB_GRAPH.match(path):
            return _json(200, {"database": db.name, **db.graph(int(match.group(1)), tenant_of(query.get("tenant")))})
        if match := _JOB.match(path):
            job = db.job(int(match.group(1)), tenant_of(query.get("tenant")), with_sql=authenticated)
            return _json(200, {"database": db.name, "sql_shown": authenticated, "job": job})
        raise ConsoleError(404, "not found")

    def _post(self, path: str, headers, body: bytes) -> Reply:
        match = (_JOB_ACTION.match(path) or _QUEUE_ACTION.match(path) or _SCHEDULE_ACTION.match(path)
                 or _BULK_ACTION.match(path))
        if match is None:
            raise ConsoleError(404, "not found")
        if not self._token:
            raise ConsoleError(403, "the console is read-only: set broker.console_token (PGBROKER_CONSOLE_TOKEN) "
                                    "to enable actions")
        user = self.user(headers.get("Authorization"))
        if user is None:
            raise ConsoleError(401, "actions need the console token (Authorization: Bearer ...)")
        origin = headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != headers.get("Host"):
            raise ConsoleError(403, "cross-origin request refused")
        if (headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            raise ConsoleError(415, "actions take a JSON body (Content-Type: application/json)")
        try:
            data = json.loads(body or b"{}")
        except (ValueError, RecursionError):   # (RecursionError: nested deeper than the parser goes)
            raise ConsoleError(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise ConsoleError(400, "the body must be a JSON object")
        reason = data.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
            raise ConsoleError(400, "reason must be a string of at most 2,000 characters")
        database = data.get("database")
        if database is not None and not isinstance(database, str):   # (not the first database instead)
            raise ConsoleError(400, "database must be a string: the name of one of this runner's databases")
        db = self._database(database)
        if match.re is _BULK_ACTION:
            filters = data.get("filters")
            expect = data.get("expect")
            if not isinstance(filters, dict) or not all(isinstance(v, str) for v in filters.values()):
                raise ConsoleError(400, "filters must be an object of strings (state, queue, tenant, name)")
            if not isinstance(expect, int) or isinstance(expect, bool) or expect < 1:
                raise ConsoleError(400, "expect must be the number of jobs the confirmation named")
            return _json(200, db.act_on_jobs(match.group(1), Filters.parse(filters), expect, user))
        if match.re is _SCHEDULE_ACTION:
            name = unquote(match.group(1))
            if not name.strip() or len(name) > 200 or "\x00" in name:
                raise ConsoleError(400, "a schedule name is 1 to 200 characters, none of them NUL")
            return _json(200, db.act_on_schedule(match.group(2), name, tenant_of(data.get("tenant"))))
        target, action = int(match.group(1)), match.group(2)
        if action in ("pause", "resume") and not 1 <= target <= 1000:
            raise ConsoleError(400, "queues are 1 to 1000")
        return _json(200, db.act(action, target, tenant_of(data.get("tenant")), reason, user))
