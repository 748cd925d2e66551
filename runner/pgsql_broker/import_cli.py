"""pgsql-broker import pg-cron: pg_cron's jobs as broker schedules (pg_cron_import.py; docs/from-pg-cron.md)."""
from __future__ import annotations

import sys

import click
import psycopg

from .config import DSN_FALLBACK
from .jobs_cli import _emit_json, _fail, _one_database
from .observe import job_queries as ops
from .pg_cron_import import CannotImport, plan_and_apply, read_cron_jobs


@click.group("import")
def importer() -> None:
    """Carry jobs over from another scheduler."""


@importer.command("pg-cron")
@click.option("--dsn", "dsns", multiple=True, metavar="DSN",
              help=f"The broker's database: the schedules are made there, for pg_cron jobs of that database. {DSN_FALLBACK}")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file with one database.")
@click.option("--cron-dsn", metavar="DSN", help="pg_cron's database (its cron.database_name, usually postgres; "
              "default: the broker's). Log in as a superuser there to see every login's jobs: pg_cron shows a login "
              "only its own.")
@click.option("--tenant", help="The tenant of the schedules (default: the login's).")
@click.option("--time-zone", metavar="ZONE", help="IANA zone of the cron expressions (default: pg_cron's "
              "cron.timezone, else GMT as pg_cron before 1.5).")
@click.option("--dry-run/--apply", "dry_run", default=True, show_default=True,
              help="Print the plan and change nothing, or create the schedules.")
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts instead of lines.")
def import_pg_cron(dsns, config_path, cron_dsn, tenant, time_zone, dry_run, as_json) -> None:
    """Create a broker schedule for each pg_cron job (cron.job) of the broker's database: its name (pg_cron-<jobid>
    for an unnamed one), schedule, command, username as run_as and active flag; fires missed while no runner served
    are not caught up, as in pg_cron. Jobs that cannot be carried over are listed with why; a schedule of the same
    name is never changed, so running it again changes nothing."""
    dsn = _one_database(dsns, config_path)
    try:
        with psycopg.connect(cron_dsn if cron_dsn is not None else dsn) as source:
            jobs, facts = read_cron_jobs(source)
        with psycopg.connect(dsn) as conn:
            if tenant is not None:
                conn.execute(ops.SET_TENANT, {"tenant": tenant})
            steps = plan_and_apply(conn, jobs, facts, time_zone, apply=not dry_run)
    except CannotImport as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except psycopg.Error as exc:
        _fail(exc)
    counts = {action: sum(s.action == action for s in steps) for action in ("create", "unchanged", "skip")}
    if as_json:
        _emit_json({"applied": not dry_run, "steps": [s.as_dict() for s in steps], **counts})
        return
    if not facts["superuser"]:
        click.echo(f"note: read as {facts['login']}, not a superuser: pg_cron showed only that login's jobs")
    for step in steps:
        click.echo(step.line())
    click.echo(f"{counts['create']} to create, {counts['unchanged']} unchanged, {counts['skip']} skipped: "
               + ("created." if not dry_run else "a dry run, nothing changed (--apply creates them)."))
