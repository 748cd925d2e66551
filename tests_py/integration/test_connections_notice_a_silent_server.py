"""What notices a dead or stalled connection (run/connections.py): libpq's keepalives, tcp_user_timeout and
connect_timeout come from the settings unless the DSN (or PGCONNECT_TIMEOUT) says otherwise, and a statement of
the runner's own that the server does not answer within its deadline ends with a lost connection instead of
waiting for ever."""
from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from pgsql_broker.run.connections import deadline, with_tcp_defaults
from pgsql_broker.settings import BrokerSettings


def test_the_settings_fill_in_what_the_dsn_does_not_set(monkeypatch):
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    params = conninfo_to_dict(with_tcp_defaults("host=db.example dbname=app keepalives_idle=3", BrokerSettings()))
    assert params["keepalives"] == "1"
    assert params["keepalives_idle"] == "3", "the DSN's own value wins"
    assert (params["keepalives_interval"], params["keepalives_count"]) == ("5", "3")
    assert (params["tcp_user_timeout"], params["connect_timeout"]) == ("30000", "10")
    assert (params["host"], params["dbname"]) == ("db.example", "app")


def test_pgconnect_timeout_wins_over_the_setting(monkeypatch):
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    params = conninfo_to_dict(with_tcp_defaults("dbname=app", BrokerSettings(connect_timeout_sec=20)))
    assert "connect_timeout" not in params


def test_a_dsn_that_turns_keepalives_off_keeps_them_off():
    params = conninfo_to_dict(with_tcp_defaults("dbname=app keepalives=0", BrokerSettings()))
    assert params["keepalives"] == "0"


def test_a_statement_past_its_deadline_loses_the_connection(db):
    async def scenario() -> None:
        conn = await psycopg.AsyncConnection.connect(with_tcp_defaults(f"dbname={db}", BrokerSettings()),
                                                     autocommit=True)
        try:
            with pytest.raises(psycopg.OperationalError):
                with deadline(conn, 0.5, "a statement that does not come back"):
                    await conn.execute("SELECT pg_sleep(5)")
            assert conn.broken
        finally:
            await conn.close()
        # a statement answered in time is untouched, and the timer does not fire afterwards
        async with await psycopg.AsyncConnection.connect(dbname=db, autocommit=True) as other:
            with deadline(other, 30, "a quick statement"):
                assert (await (await other.execute("SELECT 1")).fetchone())[0] == 1
            assert not other.broken

    asyncio.run(scenario())
