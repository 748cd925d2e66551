"""roles.sql hands the job executor schemas broker_exec_<role oid> to broker_admin. It used to
take every schema of that name, including one a squatter made for another role (granting
itself CREATE there through PUBLIC): broker_admin then owned it, so broker_run trusted what
was planted next to that role's executor."""
from __future__ import annotations

import uuid

import psycopg
import pytest

from conftest import ROLES_SQL, connect
from squatter import as_login, assert_refused, install, mallory, owner_of_schema  # noqa: F401


@pytest.fixture
def victim(empty_db):
    name = f"victim_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE broker_enqueue')
        oid = admin.execute("SELECT oid FROM pg_roles WHERE rolname = %s", (name,)).fetchone()[0]
    yield name, f"broker_exec_{oid}"
    with connect(empty_db) as conn:
        conn.execute(f'DROP OWNED BY "{name}" CASCADE')
    with connect("postgres") as admin:
        admin.execute(f'DROP ROLE "{name}"')


@pytest.mark.parametrize("planted", ["before the install", "after the install"])
def test_a_planted_executor_schema_is_refused_and_left_to_its_owner(empty_db, mallory, victim, planted):
    role, schema = victim

    def plant() -> None:
        with as_login(empty_db, mallory) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(f'GRANT USAGE, CREATE ON SCHEMA "{schema}" TO PUBLIC')

    if planted == "before the install":
        plant()
    first = install(empty_db)
    assert first.returncode == 0, first.stderr
    if planted == "after the install":
        plant()
    with connect(empty_db) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute(ROLES_SQL)
    assert refused.value.sqlstate == "42501" and schema in str(refused.value), refused.value
    assert owner_of_schema(empty_db, schema) == mallory
    assert_refused(install(empty_db, "--with-roles"), schema)
    assert owner_of_schema(empty_db, schema) == mallory and owner_of_schema(empty_db, "broker") != "broker_admin"

    # the broker does not use it either: a clear error, nothing is created there
    with connect(empty_db) as conn, pytest.raises(psycopg.Error) as no_executor:
        conn.execute("SELECT broker.broker_create_executor(%s)", (role,))
    assert no_executor.value.sqlstate == "42501" and f"schema {schema} exists" in str(no_executor.value)
    with connect(empty_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = %s::regnamespace",
                            (schema,)).fetchone() == (0,)


@pytest.mark.parametrize("flags", [(), ("--no-extension",)], ids=["extension", "migrations"])
def test_executor_schemas_the_broker_made_are_handed_over_and_reinstall_keeps_working(empty_db, victim, flags):
    role, schema = victim
    assert install(empty_db, *flags).returncode == 0
    with connect(empty_db) as conn:  # made by the broker before roles.sql ran
        conn.execute("SELECT broker.broker_create_executor(%s)", (role,))
    for _ in range(2):
        result = install(empty_db, *flags, "--with-roles")
        assert result.returncode == 0, result.stderr
        assert owner_of_schema(empty_db, schema) == "broker_admin"
        assert owner_of_schema(empty_db, "broker") == "broker_admin"
    with as_login(empty_db, role) as conn:
        conn.execute("SELECT broker.broker_add_job('x', 'SELECT 1')")
    verify = install(empty_db, "--verify-only")
    assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout
