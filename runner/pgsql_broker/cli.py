"""The pgsql-broker command line. Exit codes: 0 ok, 1 runtime failure, 2 usage or config error."""
from __future__ import annotations

import sys

import click
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from . import __version__
from .config import ConfigError, load_databases
from .credentials import ADMIN_PASSWORD, ADMIN_USER, ROLE_PASSWORDS
from .install import InstallError, apply_roles, install, verify


def _describe(dsn: str) -> str:
    """A connection target for messages: never the password."""
    params = conninfo_to_dict(dsn)
    return f"{params.get('dbname') or '(default database)'} on {params.get('host') or '(default host)'}"


def _targets(dsns: tuple[str, ...], config_path: str | None) -> list[tuple[str, str]]:
    """(label, dsn) of every database named by --dsn and --config."""
    targets = [(_describe(dsn), dsn) for dsn in dsns]
    if config_path:
        try:
            targets += [(db.name, db.dsn()) for db in load_databases(config_path)]
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
    if not targets:
        raise click.UsageError("name the database(s): --dsn DSN (repeatable) or --config broker.yaml")
    return targets


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgsql-broker")
def main() -> None:
    """pgsql_broker: a PostgreSQL job broker. The database does the work."""


@main.command("install")
@click.option("--dsn", "dsns", multiple=True, metavar="DSN", help="libpq connection string or URI (repeatable).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file: every database in it.")
@click.option("--no-extension", is_flag=True, help="Install as tracked migrations even where CREATE EXTENSION works.")
@click.option("--verify-only", is_flag=True, help="Report version, pending migrations and differences; change nothing.")
@click.option("--with-roles", is_flag=True, help="Also create/rotate broker_admin, broker_runtime, broker_enqueue.")
@click.option("--admin-user", help="Login for --with-roles (else $PGUSER, $PG_USER, prompt).")
@click.option("--admin-password", help="Its password (else $PGPASSWORD, $PG_PASS, prompt).")
@click.option("--broker-admin-password", help="Password for broker_admin (else $BROKER_ADMIN_PASSWORD, prompt).")
@click.option("--broker-runtime-password", help="Password for broker_runtime (else $BROKER_RUNTIME_PASSWORD, prompt).")
@click.option("--broker-enqueue-password", help="Password for broker_enqueue (else $BROKER_ENQUEUE_PASSWORD, prompt).")
def install_command(dsns, config_path, no_extension, verify_only, with_roles, admin_user, admin_password,
                    broker_admin_password, broker_runtime_password, broker_enqueue_password) -> None:
    """Install or upgrade the broker schema: CREATE EXTENSION where possible, else tracked migrations.

    Idempotent; refuses to downgrade or to mix the two install paths on one database.
    """
    if verify_only and with_roles:
        raise click.UsageError("--verify-only cannot be combined with --with-roles")
    targets = _targets(dsns, config_path)

    if verify_only:
        failed = False
        for label, dsn in targets:
            try:
                report = verify(dsn)
            except psycopg.Error as exc:
                click.echo(f"{label}: cannot connect or read: {exc}", err=True)
                failed = True
                continue
            for line in report.lines():
                click.echo(f"{label}: {line}")
            failed |= not report.ok
        sys.exit(1 if failed else 0)

    passwords: dict[str, str] = {}
    if with_roles:
        # Resolve every credential before changing anything.
        user = ADMIN_USER.resolve(admin_user)
        secret = ADMIN_PASSWORD.resolve(admin_password)
        given = {"broker_admin": broker_admin_password, "broker_runtime": broker_runtime_password,
                 "broker_enqueue": broker_enqueue_password}
        passwords = {role: ROLE_PASSWORDS[role].resolve(given[role]) for role in ROLE_PASSWORDS}
        targets = [(label, make_conninfo(dsn, user=user, password=secret)) for label, dsn in targets]

    failed = False
    for label, dsn in targets:
        try:
            install(dsn, no_extension=no_extension, log=lambda msg, label=label: click.echo(f"{label}: {msg}"))
            if with_roles:
                apply_roles(dsn, passwords, log=lambda msg, label=label: click.echo(f"{label}: {msg}"))
        except (InstallError, psycopg.Error) as exc:
            click.echo(f"{label}: error: {exc}", err=True)
            failed = True
    sys.exit(1 if failed else 0)
