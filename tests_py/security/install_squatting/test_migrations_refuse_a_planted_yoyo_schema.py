"""install --no-extension (also the compose migrate service, as the superuser) keeps yoyo's
bookkeeping in schema broker_yoyo. It used to take that schema as it found it: a squatter's
yoyo_lock table with a trigger ran as the installer, and the install reported success."""
from __future__ import annotations

from conftest import connect
from squatter import as_login, assert_refused, escalation, install, is_superuser, mallory, owner_of_schema  # noqa: F401

YOYO_LOCK = "CREATE TABLE broker_yoyo.yoyo_lock (locked int DEFAULT 1, ctime timestamp, pid int NOT NULL, PRIMARY KEY (locked))"


def test_a_planted_yoyo_lock_with_a_trigger_is_refused_and_never_fires(empty_db, mallory):
    with as_login(empty_db, mallory) as conn:
        conn.execute("CREATE SCHEMA broker_yoyo")
        conn.execute(YOYO_LOCK)
        conn.execute("CREATE FUNCTION broker_yoyo.grab() RETURNS trigger LANGUAGE plpgsql "
                     f"AS $$ BEGIN {escalation(mallory)} RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER grab BEFORE INSERT ON broker_yoyo.yoyo_lock FOR EACH ROW EXECUTE FUNCTION broker_yoyo.grab()")
        conn.execute("GRANT USAGE ON SCHEMA broker_yoyo TO PUBLIC")
    result = install(empty_db, "--no-extension")
    assert not is_superuser(mallory), "the squatter's trigger ran as the installer"
    assert_refused(result, "broker_yoyo", mallory)
    assert owner_of_schema(empty_db, "broker") is None, "nothing of the broker was installed"


def test_an_empty_schema_of_another_role_is_refused(empty_db, mallory):
    """Empty today, but its owner could add a trigger to yoyo's tables at any later install."""
    with as_login(empty_db, mallory) as conn:
        conn.execute("CREATE SCHEMA broker_yoyo")
        conn.execute("GRANT USAGE, CREATE ON SCHEMA broker_yoyo TO PUBLIC")
    assert_refused(install(empty_db, "--no-extension"), "broker_yoyo", mallory)
    assert owner_of_schema(empty_db, "broker") is None
    assert owner_of_schema(empty_db, "broker_yoyo") == mallory


def test_foreign_objects_in_the_installers_own_schema_are_refused(empty_db, mallory):
    """The installer's schema, but a table in it that someone else may add triggers to."""
    with connect(empty_db) as conn:
        conn.execute("CREATE SCHEMA broker_yoyo")
        conn.execute(YOYO_LOCK)
        conn.execute(f'GRANT TRIGGER ON broker_yoyo.yoyo_lock TO "{mallory}"')
    assert_refused(install(empty_db, "--no-extension"), "broker_yoyo", "yoyo_lock")
    assert owner_of_schema(empty_db, "broker") is None


def test_the_installers_own_schema_is_used_and_reinstall_keeps_working(empty_db):
    """A schema the installer made (say by an install that stopped half-way) is fine."""
    with connect(empty_db) as conn:
        conn.execute("CREATE SCHEMA broker_yoyo")
    first = install(empty_db, "--no-extension")
    assert first.returncode == 0, first.stderr
    again = install(empty_db, "--no-extension", "--with-roles", "--admin-user", "postgres")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr
    verify = install(empty_db, "--verify-only")
    assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout
