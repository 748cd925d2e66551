"""What an active database's session connection does besides LISTEN, serialised on it: the poll (which
queues have work), the schedule tick, deferred dependency releases, lease recovery, the queue depths and
instances the dashboard and metrics show, the ping, retention on its policy (run/retention.py), and the hand-back of what a worker stuck past its batch
budget had claimed. Idle, each is one cheap statement now and then; none opens a connection."""
from __future__ import annotations

import logging
import time

import psycopg
from psycopg.rows import dict_row, namedtuple_row

from ..observe import flow, job_queries
from ..observe.metrics import bounded_stats
from . import queries, stopping

log = logging.getLogger("pgsql_broker")
# Deferred dependency releases: how often the session looks for them (at most queue_timer_sec).
RELEASE_POLL_SEC = 1.0
# The ping only refreshes last_ping_at for status displays: the instance lock (a session advisory lock) is what
# makes an instance active, so an idle runner need not write more often.
PING_SEC = 30.0
# A transaction of several jobs still running after this long: the session asks which of them executes.
ACTIVITY_AFTER_SEC = 1.0
# The soonest a poll comes again for a parked job's time (a statement per poll on the session connection).
MIN_POLL_SEC = 0.05
TIMERS = ("poll", "release", "recover", "stats", "activity", "purge", "ping")
SESSION_BATCHES = 5  # purge batches per state and pass on the session connection


def poll_soon(runner, now: float) -> None:
    """A job was parked until a time (NOTIFY '<database>/due', broker._notify_due): poll again soon, so that
    broker_next_due is asked again and the poll comes when that job is due, not at the next regular poll. Any
    login may NOTIFY: at most one poll per MIN_POLL_SEC however many arrive."""
    runner._next["poll"] = min(runner._next.get("poll", now), now + MIN_POLL_SEC)


async def run_timers(runner, conn: psycopg.AsyncConnection, now: float) -> None:
    """Whatever is due now (runner._next holds when each timer is due next); each step under the deadline of
    the runner's own statements (statement_deadline_sec), which a stalled connection does not meet."""
    db, settings, t = runner.db, runner.settings, runner._next
    with runner._deadline(conn, "maintenance", statements=4):
        await _release_overdue(runner, conn, now)
        if now >= runner._ticker.due_at:
            await runner._ticker.tick(conn)
        if now >= t["poll"]:
            due_in = await _poll(runner, conn)
            # again when a parked job's time comes (a delay, a rate's next tokens), if before the next poll
            t["poll"] = now + min(settings.queue_timer_sec, max(due_in, MIN_POLL_SEC) if due_in is not None
                                  else settings.queue_timer_sec)
    if now >= t["release"]:
        # deferred dependency releases (large fan-ins): never on a claim's path, bounded per call, and
        # a call never waits on a lock; again while it applies something
        while not runner._draining.is_set():
            with runner._deadline(conn, "dependency releases"):
                if not (await (await conn.execute(queries.APPLY_RELEASES)).fetchone())[0]:
                    break
        t["release"] = now + min(RELEASE_POLL_SEC, settings.queue_timer_sec)
    if now >= t["recover"]:
        if runner._orphans or runner._orphans_alone or runner._orphan_claims:
            await runner._hand_back_orphans(conn)  # (what a worker could not hand back when it lost its connection)
        cur = conn.cursor(row_factory=queries.RECOVERED_ROW)
        with runner._deadline(conn, "lease recovery"):
            recovered = await (await cur.execute(queries.RECOVER)).fetchall()
        for row in recovered:
            log.warning("recovered a job whose lease expired or whose server restarted",
                        extra={"database": db.name, "job_id": row.job_id, "status": row.status})
        t["recover"] = now + settings.stale_job_recovery_sec
    with runner._deadline(conn, "maintenance"):
        await _stats_and_activity(runner, conn, now)
    if now >= t["purge"]:
        # a few batches per pass, so that wake-ups and the other timers wait little; soon again while more is due
        with runner._deadline(conn, "retention", statements=SESSION_BATCHES):
            await runner._retention.purge(conn, runner._draining, SESSION_BATCHES)
        t["purge"] = now + (1.0 if runner._retention.more else settings.retention_interval_sec)
    if now >= t["ping"]:
        with runner._deadline(conn, "ping"):
            await conn.execute(queries.PING, {"instance": runner.instance_id})
        t["ping"] = now + PING_SEC
    runner.pool.reap()


async def _stats_and_activity(runner, conn: psycopg.AsyncConnection, now: float) -> None:
    """The queue depths and instances, and which job of a long transaction of several executes."""
    db, settings, view, t = runner.db, runner.settings, runner.view, runner._next
    if now >= t["stats"]:
        cur = conn.cursor(row_factory=dict_row)
        stats = await (await cur.execute(queries.QUEUE_STATS)).fetchall()
        _report_paused(runner, stats)
        view.queue_stats = bounded_stats(stats, db.queue_count)
        view.metrics.set_depth(db.name, view.queue_stats)
        view.tenant_stats = flow.bounded(await (await cur.execute(job_queries.TENANT_STATS)).fetchall())
        view.key_stats = flow.bounded(await (await cur.execute(job_queries.KEY_STATS)).fetchall())
        view.metrics.set_flow(db.name, view.tenant_stats, view.key_stats)
        view.instances = await (await cur.execute(queries.INSTANCES)).fetchall()
        t["stats"] = now + settings.queue_depth_poll_sec
    if now >= t["activity"]:
        wall = time.time()  # (JobView.started is wall-clock time, for the dashboard)
        if any(wall - v.started >= ACTIVITY_AFTER_SEC for v in view.running.values() if v.activity == "waiting"):
            # a transaction of several jobs that runs long: which of its jobs executes, which waits
            cur = conn.cursor(row_factory=namedtuple_row)
            executing = {r.job_id for r in await (await cur.execute(queries.JOB_ACTIVITY)).fetchall()
                         if r.activity == "executing"}
            for job in list(view.running.values()):
                job.activity = "executing" if job.job_id in executing else "waiting"
        # (due again either way: a timer left in the past would make the session's wait for NOTIFY zero)
        t["activity"] = now + ACTIVITY_AFTER_SEC


def _report_paused(runner, stats: list[dict]) -> None:
    """Jobs ready in a paused queue wait until it is resumed: say so once per queue and tenant (and again
    after a resume and a new pause); status, the console and broker_queue_paused show it all along."""
    paused = {(r["job_queue"], r["tenant_id"]) for r in stats if r.get("paused") and r.get("ready")}
    for queue, tenant in sorted(paused - runner._warned_paused, key=str):
        log.warning("jobs wait in a paused queue: nothing runs them until broker_pause_queue(queue, false)",
                    extra={"database": runner.db.name, "queue": queue, "tenant": tenant or "(every tenant)"})
    runner._warned_paused = paused


async def _poll(runner, conn: psycopg.AsyncConnection) -> float | None:
    """Which queues have a job claimable now: wake one worker of each of ours; report the others once. Returns
    the seconds until the next parked job is claimable by time alone (None: none is parked so)."""
    db = runner.db
    ready = (await (await conn.execute(queries.READY_QUEUES)).fetchone())[0] or []
    due_in = (await (await conn.execute(queries.NEXT_DUE)).fetchone())[0]
    unserved = [q for q in ready if q > db.queue_count]
    for q in ready:
        if q <= db.queue_count:
            runner._lanes[q].wake_one()
    for q in set(unserved) - runner._warned_unserved:
        log.warning("jobs wait in a queue number this runner does not serve (queue_count %d): nothing runs them "
                    "until a runner serves it", db.queue_count, extra={"database": db.name, "queue": q})
    runner._warned_unserved.update(unserved)
    runner.view.unserved = unserved
    runner.metrics.set_unserved(db.name, unserved)
    return due_in


async def _release_overdue(runner, conn: psycopg.AsyncConnection, now: float) -> None:
    """A worker's transaction that runs past twice the batch budget (a job caught the budget's cancel itself):
    hand back, on the session connection, what else that worker claimed, so that other workers take it up
    (only the jobs of that transaction wait for it)."""
    overdue = 2 * runner.settings.batch_budget_ms / 1000
    for key, since in list(runner._executing_since.items()):
        rows = runner._buffers[key]
        if rows and now - since >= overdue and key not in runner._interrupting:
            unrun = rows[:]
            rows.clear()
            released = await stopping.release(conn, unrun)
            stopping.log_released(runner.db.name, key[0], unrun, released,
                                  "its worker's transaction runs past the batch budget")
