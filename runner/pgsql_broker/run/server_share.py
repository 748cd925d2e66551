"""The runner's share of a PostgreSQL server's connections: its databases on one server share one budget.

A server is named by the host and port its databases' connection settings give (libpq's PGHOST and PGPORT
when they give none): the runner groups its databases by that before it connects, since what would identify
a server from the inside (its system identifier, data_directory) needs privileges the runner's login does
not have. Two spellings of one server (a host name and its address, a socket and TCP) are two groups; the
runner notices it from what any login may read (the postmaster's start time and port) and warns.

Each group is sized from the server at start, on one short connection to its first database: the connections
ordinary logins may open are max_connections less superuser_reserved_connections and (PostgreSQL 16+)
reserved_connections. By default the runner takes half of them (max_open_conns_total 0); an explicit
max_open_conns_total is the runner's connections to each server at most, and more than the server can give
is refused at start.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..config import DatabaseConfig
from .connect_errors import PermanentCounter, connect_message
from .connections import with_tcp_defaults

log = logging.getLogger("pgsql_broker")

SERVER_LIMITS = """
SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
       coalesce(current_setting('reserved_connections', true), '0')::int,
       pg_postmaster_start_time()::text, current_setting('port')
"""


class ShareRefused(Exception):
    """The server cannot give the runner the connections it needs or is told to take; the message is one line."""


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int
    superuser_reserved: int
    reserved: int  # reserved_connections (PostgreSQL 16+; 0 before)
    identity: tuple[str, str]  # the postmaster's start time and port: one server under two names

    @property
    def usable(self) -> int:
        """Connections a login without superuser or pg_use_reserved_connections may open."""
        return self.max_connections - self.superuser_reserved - self.reserved


def server_key(db: DatabaseConfig) -> str:
    """host:port of a database's server as its connection settings name it (libpq's defaults otherwise)."""
    params = conninfo_to_dict(db.raw_dsn if db.raw_dsn is not None else db.dsn())
    host = (params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST")
            or os.environ.get("PGHOSTADDR") or "(default socket)")
    return f"{host}:{params.get('port') or os.environ.get('PGPORT') or 5432}"


def group_by_server(databases: list[DatabaseConfig]) -> dict[str, list[DatabaseConfig]]:
    groups: dict[str, list[DatabaseConfig]] = {}
    for db in databases:
        groups.setdefault(server_key(db), []).append(db)
    return groups


def connection_cap(server: str, limits: ServerLimits, explicit: int) -> int:
    """The runner's connections to `server`: max_open_conns_total when given (refused beyond what the server
    gives), else half of what it gives."""
    usable = limits.usable
    described = (f"server {server} gives {usable} connections to logins without superuser (max_connections "
                 f"{limits.max_connections} - superuser_reserved_connections {limits.superuser_reserved}"
                 + (f" - reserved_connections {limits.reserved}" if limits.reserved else "") + ")")
    if explicit:
        if explicit > usable:
            raise ShareRefused(f"broker.max_open_conns_total (--max-open-conns-total, PGBROKER_MAX_OPEN_CONNS_TOTAL) "
                               f"is {explicit}, but {described}: give at most {usable}, or 0 for half of it")
        return explicit
    if usable // 2 < 2:
        raise ShareRefused(f"{described}: half of it is fewer than the 2 connections the runner needs (a session "
                           f"and a worker); raise max_connections or set broker.max_open_conns_total (at most "
                           f"{usable})")
    return usable // 2


async def read_limits(db: DatabaseConfig, settings, application_name: str, stopping: asyncio.Event,
                      retry_max: float) -> ServerLimits | None:
    """What the server of `db` reports, on one short connection; retried with backoff (up to `retry_max` s)
    while it cannot connect, as a database's session is (PermanentError after refusals that do not heal);
    None when `stopping` is set first."""
    delay, logged = 1.0, False
    refusals = PermanentCounter(db.name)
    while not stopping.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(with_tcp_defaults(db.dsn(), settings), autocommit=True,
                                                             application_name=application_name) as conn:
                row = await (await conn.execute(SERVER_LIMITS)).fetchone()
            return ServerLimits(row[0], row[1], row[2], (row[3], row[4]))
        except psycopg.Error as exc:
            if not refusals.check(exc) and not logged:
                log.warning("database unavailable, retrying with backoff", extra={
                    "database": db.name, "error": connect_message(exc), "reading": "the server's connection limits"})
                logged = True
        try:
            await asyncio.wait_for(stopping.wait(), delay)
        except asyncio.TimeoutError:
            delay = min(delay * 2, retry_max)
    return None
