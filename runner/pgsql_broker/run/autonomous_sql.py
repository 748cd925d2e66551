"""The runner's check of an autonomous job's text, with PostgreSQL's own parser (libpg_query, through pglast),
right before it runs: exactly one statement, of a kind an autonomous job may be. The extension checked the text
at enqueue with a stricter lexer (broker._autonomous_kind); this is the check the runner relies on, whatever
reached the table. What runs after `SET ROLE` must be one statement that cannot change the role back: a second
statement, or any other kind of statement, could (docs/security.md, "Autonomous jobs")."""
from __future__ import annotations

from pglast import ast, parse_sql
from pglast.parser import ParseError

# the kinds that may run after SET ROLE (via 'set_role'): maintenance statements whose user code (index
# expressions, a materialized view's query) PostgreSQL runs as the object's owner in a security-restricted
# operation, where SET ROLE, RESET ROLE and SET SESSION AUTHORIZATION are refused
MAINTENANCE = ("VACUUM", "ANALYZE", "CREATE INDEX CONCURRENTLY", "REINDEX CONCURRENTLY",
               "REFRESH MATERIALIZED VIEW CONCURRENTLY")
# and on a connection that logged in as the role itself (via 'login'), a CALL too
LOGIN_ONLY = ("CALL",)


class Refused(Exception):
    """The text may not run as an autonomous job: `sqlstate` and a one-line message."""

    def __init__(self, sqlstate: str, message: str):
        super().__init__(message)
        self.sqlstate = sqlstate


def _kind(stmt: ast.Node) -> str | None:
    if isinstance(stmt, ast.VacuumStmt):
        return "VACUUM" if stmt.is_vacuumcmd else "ANALYZE"
    if isinstance(stmt, ast.IndexStmt) and stmt.concurrent:
        return "CREATE INDEX CONCURRENTLY"
    if isinstance(stmt, ast.ReindexStmt) and any(p.defname == "concurrently" for p in stmt.params or ()):
        return "REINDEX CONCURRENTLY"
    if isinstance(stmt, ast.RefreshMatViewStmt) and stmt.concurrent:
        return "REFRESH MATERIALIZED VIEW CONCURRENTLY"
    if isinstance(stmt, ast.CallStmt):
        return "CALL"
    return None


def check(text: str, via: str) -> str:
    """The kind of the one statement `text` is, when it may run `via` ('set_role' or 'login'); else Refused."""
    try:
        statements = parse_sql(text)
    except ParseError as exc:
        raise Refused("42601", f"refused: the autonomous job's SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise Refused("42501", f"refused: an autonomous job is exactly one statement, this text has {len(statements)}")
    kind = _kind(statements[0].stmt)
    if kind is None:
        raise Refused("42501", f"refused: an autonomous job cannot run {type(statements[0].stmt).__name__} "
                               f"(allowed: {', '.join(MAINTENANCE + LOGIN_ONLY)})")
    if kind in LOGIN_ONLY and via != "login":
        raise Refused("42501", f"refused: {kind} runs only on a connection that logs in as the job's role "
                               f"(broker_allow_autonomous(role, 'login')), never after SET ROLE")
    return kind
