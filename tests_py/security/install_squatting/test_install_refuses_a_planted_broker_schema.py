"""A schema broker made before the first install is never adopted.

CREATE EXTENSION used to install into it, and roles.sql then made broker_admin the owner of
every function there, including the squatter's SECURITY DEFINER function that it had let
pg_database_owner call: arbitrary SQL as broker_admin. A planted broker_schema_migrations
passed for a migrations install, and install read it (a view: the squatter's code ran as
the installer)."""
from __future__ import annotations

import psycopg
import pytest

from conftest import ROLES_SQL, connect
from squatter import as_login, assert_refused, escalation, install, is_superuser, mallory, owner_of_schema  # noqa: F401


def plant_broker_schema(db: str, role: str) -> None:
    with as_login(db, role) as conn:
        conn.execute("CREATE SCHEMA broker")
        conn.execute("CREATE FUNCTION broker.evil(sql text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER "
                     "AS $$ BEGIN EXECUTE sql; END $$")
        conn.execute("GRANT EXECUTE ON FUNCTION broker.evil(text) TO pg_database_owner")
        conn.execute("GRANT USAGE ON SCHEMA broker TO PUBLIC")


def owner_of_evil(db: str) -> str:
    with connect(db) as conn:
        return conn.execute("SELECT proowner::regrole::text FROM pg_proc WHERE proname = 'evil'").fetchone()[0]


def test_create_extension_refuses_a_planted_schema_and_creates_nothing(empty_db, mallory):
    plant_broker_schema(empty_db, mallory)
    with connect(empty_db) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute("CREATE EXTENSION pgsql_broker")
    assert refused.value.sqlstate == "42P06", refused.value
    assert "schema broker already exists" in str(refused.value) and mallory in str(refused.value)
    with connect(empty_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgsql_broker'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'broker'::regnamespace").fetchone() == (1,)
    assert owner_of_evil(empty_db) == mallory


@pytest.mark.parametrize("flags", [(), ("--no-extension",), ("--with-roles",)])
def test_the_cli_refuses_a_planted_schema(empty_db, mallory, flags):
    plant_broker_schema(empty_db, mallory)
    assert_refused(install(empty_db, *flags), "schema broker")
    assert owner_of_evil(empty_db) == mallory and owner_of_schema(empty_db, "broker") == mallory


def test_an_old_install_in_a_planted_schema_is_neither_upgraded_nor_handed_over(empty_db, mallory):
    """The frozen 0.1.0 script has no guard: installs into a squatted schema exist."""
    plant_broker_schema(empty_db, mallory)
    with connect(empty_db) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker VERSION '0.1.0'")
    with connect(empty_db) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute("ALTER EXTENSION pgsql_broker UPDATE")
    assert refused.value.sqlstate == "42501", refused.value
    assert f"schema broker is owned by {mallory}" in str(refused.value)
    for flags in ((), ("--with-roles",)):
        assert_refused(install(empty_db, *flags), "schema broker", mallory)
    with connect(empty_db) as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pgsql_broker'").fetchone() == ("0.1.0",)
    assert owner_of_evil(empty_db) == mallory and owner_of_schema(empty_db, "broker") == mallory


@pytest.mark.parametrize("flags", [(), ("--no-extension",)], ids=["extension", "migrations"])
def test_roles_sql_hands_over_only_what_the_broker_made(empty_db, mallory, flags):
    """However an object the broker did not make got into schema broker, roles.sql refuses
    (42501, naming it) rather than give it to broker_admin, and changes nothing."""
    assert install(empty_db, *flags).returncode == 0
    with connect(empty_db) as conn:
        conn.execute("CREATE FUNCTION broker.evil(sql text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER "
                     "AS $$ BEGIN EXECUTE sql; END $$")
        conn.execute(f'ALTER FUNCTION broker.evil(text) OWNER TO "{mallory}"')
    with connect(empty_db) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute(ROLES_SQL)
    assert refused.value.sqlstate == "42501", refused.value
    assert "function broker.evil(" in str(refused.value) and mallory in str(refused.value)
    assert_refused(install(empty_db, *flags, "--with-roles"), "broker.evil(")
    assert owner_of_evil(empty_db) == mallory and owner_of_schema(empty_db, "broker") == "postgres"


def test_a_planted_migrations_record_is_neither_read_nor_believed(empty_db, mallory):
    with as_login(empty_db, mallory) as conn:
        conn.execute("CREATE SCHEMA broker")
        conn.execute("CREATE FUNCTION broker.version_of() RETURNS text LANGUAGE plpgsql "
                     f"AS $$ BEGIN {escalation(mallory)} RETURN '0.2.0'; END $$")
        conn.execute("CREATE VIEW broker.broker_schema_migrations AS "
                     "SELECT broker.version_of() AS version, 'migrations'::text AS install_path")
        conn.execute("GRANT USAGE ON SCHEMA broker TO PUBLIC")
        conn.execute("GRANT SELECT ON broker.broker_schema_migrations TO PUBLIC")
    for flags in ((), ("--no-extension",), ("--with-roles",), ("--verify-only",)):
        result = install(empty_db, *flags)
        assert not is_superuser(mallory), f"install {flags} ran the squatter's view as the installer"
        if flags == ("--verify-only",):  # a report on stdout, not an error
            assert result.returncode == 1 and f"schema broker is owned by {mallory}" in result.stdout, result.stdout
        else:
            assert_refused(result, "schema broker", mallory)


def test_the_schema_drop_extension_leaves_is_installed_into_again(empty_db):
    """DROP EXTENSION keeps schema broker (broker_admin's, USAGE for the broker roles): empty and
    nobody else's, so a new CREATE EXTENSION and roles.sql use it."""
    assert install(empty_db, "--with-roles").returncode == 0
    with connect(empty_db) as conn:
        conn.execute("DROP EXTENSION pgsql_broker")
        conn.execute("CREATE EXTENSION pgsql_broker")
        conn.execute(ROLES_SQL)
    again = install(empty_db, "--with-roles")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr
    assert owner_of_schema(empty_db, "broker") == "broker_admin"
