"""The installer's sessions resolve nothing through schemas other roles can create in.

libpq's default search_path is "$user", public: a role with CREATE on the database can make a
schema named after the installing login (here postgres), and in databases made before
PostgreSQL 15 anyone may create in public. A function there that matches the installer's call
more exactly than pg_catalog's (psycopg sends 1 as smallint, so pg_advisory_lock(integer,
smallint) beats pg_catalog's (integer, integer)) ran as the installer: a superuser here."""
from __future__ import annotations

import os

import pytest

from conftest import connect
from squatter import as_login, escalation, install, is_superuser, mallory  # noqa: F401

# Every call the install code makes, in the signatures psycopg's parameters would give them.
BAITS = ("pg_advisory_lock(integer, smallint)", "pg_advisory_unlock(integer, smallint)",
         "pg_advisory_lock(bigint)", "to_regnamespace(text)", "to_regclass(text)",
         "encrypt_password(text, text)")


def plant(db: str, role: str, schema: str) -> None:
    with as_login(db, role) as conn:
        if schema != "public":
            conn.execute(f'CREATE SCHEMA "{schema}"')
        for bait in BAITS:
            conn.execute(f'CREATE FUNCTION "{schema}".{bait} RETURNS boolean LANGUAGE plpgsql '
                         f"AS $$ BEGIN {escalation(role)} RETURN true; END $$")
            conn.execute(f'GRANT EXECUTE ON FUNCTION "{schema}".{bait} TO PUBLIC')


@pytest.mark.parametrize("flags", [(), ("--no-extension",)], ids=["extension", "migrations"])
@pytest.mark.parametrize("where", ["installer's $user schema", "public"])
def test_install_with_roles_calls_nothing_planted_on_the_default_search_path(empty_db, mallory, where, flags):
    if where == "public":  # as in a database created before PostgreSQL 15
        with connect(empty_db) as conn:
            conn.execute(f'GRANT CREATE ON SCHEMA public TO "{mallory}"')
    plant(empty_db, mallory, "public" if where == "public" else os.environ["PGUSER"])
    first = install(empty_db, *flags, "--with-roles", "--admin-user", os.environ["PGUSER"])
    again = install(empty_db, *flags, "--with-roles", "--admin-user", os.environ["PGUSER"])
    assert not is_superuser(mallory), "a planted look-alike ran as the installer"
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr
