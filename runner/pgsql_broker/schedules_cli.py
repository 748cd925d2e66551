"""pgsql-broker schedules list | show | pause | resume | run-now: operate cron schedules from the command line.

The same connection options, tenant and output as the `jobs` commands (jobs_cli.py): one database, --tenant acts for
that tenant, tables for people and --json for scripts; a failure is one line on stderr (the server's message and
SQLSTATE) and exit 1, a bad argument exit 2. Fire times are shown on the schedule's own clock (its time zone, with
the UTC offset then), as the server's time zone database evaluates them.
"""
from __future__ import annotations

import sys

import click

from .jobs_cli import _emit_json, _one_database, _rows, _run, db_options
from .observe import schedule_queries as ops
from .observe.logs import safe_text
from .states import JobState


def _state(row: dict) -> str:
    return "enabled" if row["enabled"] else "paused"


def _with_zoned(row: dict) -> dict:
    """The row for --json: fire times as instants (UTC) and on the schedule's clock."""
    out = {k: v for k, v in row.items() if not k.endswith(("_local", "_offset"))}
    out["state"] = _state(row)
    out["next_fire_in_zone"] = ops.zoned(row["next_local"], row["next_offset"]) if row["next_local"] else None
    out["last_fire_in_zone"] = ops.zoned(row["last_local"], row["last_offset"]) if row["last_local"] else None
    if "last_job_status" in row:
        out["last_job_state"] = JobState(row["last_job_status"]).label if row["last_job_status"] is not None else None
        del out["last_job_status"]
    return out


@click.group("schedules")
def schedules() -> None:
    """List, show, pause, resume and run cron schedules now."""


@schedules.command("list")
@db_options
@click.option("--limit", type=click.IntRange(1, 10000), default=1000, show_default=True, help="At most this many, by name.")
def schedules_list(dsns, config_path, tenant, as_json, limit) -> None:
    """The tenant's schedules: expression, time zone, state, next and last fire on the schedule's clock."""
    dsn = _one_database(dsns, config_path)
    rows = _run(dsn, tenant, lambda conn: _rows(conn, ops.SCHEDULES, {"limit": limit}))
    if as_json:
        _emit_json([_with_zoned(r) for r in rows])
        return
    click.echo(f"{'name':30} {'cron':16} {'time zone':20} {'state':8} {'next fire (its zone)':23} last fire (its zone)")
    for r in rows:
        click.echo(f"{safe_text(r['schedule_name'])[:30]:30} {safe_text(r['cron_expr'])[:16]:16} "
                   f"{safe_text(r['time_zone'])[:20]:20} {_state(r):8} "
                   f"{ops.zoned(r['next_local'], r['next_offset']):23} {ops.zoned(r['last_local'], r['last_offset'])}"
                   + (f"  error: {safe_text(r['last_error'])[:80]}" if r["last_error"] else ""))
    if not rows:
        click.echo("(no schedules)")


@schedules.command("show")
@db_options
@click.argument("name")
@click.option("--jobs", "job_count", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="Show this many of its newest jobs.")
def schedules_show(dsns, config_path, tenant, as_json, name, job_count) -> None:
    """A schedule: its timing, its job template, its last fire and job, and its newest jobs."""
    dsn = _one_database(dsns, config_path)

    def read(conn):
        found = _rows(conn, ops.SCHEDULE, {"name": name})
        if not found:
            return None
        jobs = _rows(conn, ops.SCHEDULE_JOBS, {"schedule_id": found[0]["schedule_id"], "limit": job_count})
        return {**_with_zoned(found[0]), "jobs": [dict(j, state=JobState(j["complete_status"]).label) for j in jobs],
                "_row": found[0]}
    shown = _run(dsn, tenant, read)
    if shown is None:
        click.echo(f"error: schedule {safe_text(name)!r} does not exist (for this login and tenant)", err=True)
        sys.exit(1)
    row = shown.pop("_row")
    if as_json:
        _emit_json(shown)
        return
    click.echo(f"schedule {safe_text(shown['schedule_name'])!r}: {shown['state']}")
    click.echo(f"  {'cron:':14}{safe_text(shown['cron_expr'])} in {safe_text(shown['time_zone'])}")
    click.echo(f"  {'next fire:':14}{ops.zoned(row['next_local'], row['next_offset'])}")
    click.echo(f"  {'last fire:':14}{ops.zoned(row['last_local'], row['last_offset'])}")
    click.echo(f"  {'last job:':14}" + (f"{shown['last_job_id']} ({shown['last_job_state'] or 'purged'})"
                                       if shown["last_job_id"] is not None else "-"))
    click.echo(f"  {'skipped:':14}{shown['skipped_fires']}{'+' if shown['skipped_fires_capped'] else ''} fire(s)")
    for label, key in (("tenant", "tenant_id"), ("owner", "created_by"), ("run as", "run_as"), ("queue", "job_queue"),
                       ("priority", "job_priority"), ("group", "job_group"), ("attempts", "max_attempts"),
                       ("timeout", "job_timeout"), ("language", "job_language"), ("search_path", "job_search_path"),
                       ("catch up", "catch_up"), ("catch up max", "catch_up_max"), ("overlap", "overlap"),
                       ("autonomous", "autonomous"), ("concurrency", "concurrency_key")):
        value = {True: "yes", False: "no"}.get(shown[key], shown[key]) if isinstance(shown[key], bool) else shown[key]
        click.echo(f"  {label + ':':14}{safe_text(str(value)) if value not in (None, '') else '-'}")
    if shown["last_error"]:
        click.echo(f"  {'last error:':14}{safe_text(shown['last_error'])}")
    if shown.get("task") is not None:   # a schedule of tasks: its task and their arguments
        click.echo(f"  {'task:':14}{safe_text(shown['task'])}")
    click.echo("  args:" if shown.get("task") is not None else "  sql:")
    for line in (shown["execute_str"] or "").splitlines() or [""]:
        click.echo(f"    {safe_text(line)}")
    if job_count:
        click.echo("  newest jobs:" + ("" if shown["jobs"] else " none"))
    for j in shown["jobs"]:
        how = "fired" if j["fired"] else f"by hand, by {safe_text(j['enqueued_by'])}"
        click.echo(f"    job {j['job_id']} {j['state']:9} created {j['created_at']:%Y-%m-%d %H:%M:%S} ({how})")


def _enable(dsns, config_path, tenant, as_json, name, enabled: bool) -> None:
    dsn = _one_database(dsns, config_path)

    def change(conn):
        before = conn.execute(ops.ENABLED, {"name": name}).fetchone()
        conn.execute(ops.ENABLE, {"name": name, "enabled": enabled})  # (a missing schedule: its error)
        return before[0] != enabled, _rows(conn, ops.SCHEDULE, {"name": name})[0]
    changed, row = _run(dsn, tenant, change)
    if as_json:
        _emit_json({"schedule": name, "enabled": enabled, "changed": changed,
                    "next_fire_at": row["next_fire_at"],
                    "next_fire_in_zone": ops.zoned(row["next_local"], row["next_offset"]) if row["next_local"] else None})
        return
    what = f"resumed, next fire {ops.zoned(row['next_local'], row['next_offset'])} ({safe_text(row['time_zone'])})" \
        if enabled else "paused"
    click.echo(f"schedule {safe_text(name)!r}: {what}" + ("" if changed else " (no change)"))


@schedules.command("pause")
@db_options
@click.argument("name")
def schedules_pause(dsns, config_path, tenant, as_json, name) -> None:
    """Stop NAME from firing (broker_enable_schedule false); its jobs already enqueued stay."""
    _enable(dsns, config_path, tenant, as_json, name, False)


@schedules.command("resume")
@db_options
@click.argument("name")
def schedules_resume(dsns, config_path, tenant, as_json, name) -> None:
    """Let NAME fire again, from its next fire after now (the fires missed while paused are not caught up)."""
    _enable(dsns, config_path, tenant, as_json, name, True)


@schedules.command("run-now")
@db_options
@click.argument("name")
def schedules_run_now(dsns, config_path, tenant, as_json, name) -> None:
    """Enqueue one job of NAME now, as a fire would (broker_run_schedule_now); its next fire stays, a paused schedule
    stays paused. With overlap skip and its previous job unfinished, nothing is enqueued (exit 0, that job named)."""
    dsn = _one_database(dsns, config_path)
    job_id, is_new = _run(dsn, tenant, lambda conn: conn.execute(ops.RUN_NOW, {"name": name}).fetchone())
    if as_json:
        _emit_json({"schedule": name, "job_id": job_id, "is_new": is_new})
    elif is_new:
        click.echo(f"schedule {safe_text(name)!r}: job {job_id} enqueued")
    else:
        click.echo(f"schedule {safe_text(name)!r}: its job {job_id} is still unfinished (overlap skip): nothing enqueued")
