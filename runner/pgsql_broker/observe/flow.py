"""Flow control as operators see it (issue 33): each tenant's part of its queues and each concurrency key's limit
and use, from broker_tenant_stats and broker_key_stats: the blocks of `pgsql-broker status`, the console's
"Tenants and limits" panel (as JSON rows) and the gauges of /metrics. Rows are dicts of the functions' columns."""
from __future__ import annotations

from .logs import safe_text, short_label

# rows kept per database for the gauges and the console: tenants and keys are the enqueuers' text and number
MAX_FLOW_ROWS = 100
ALL_TENANTS = "all tenants"


def bounded(rows: list[dict], limit: int = MAX_FLOW_ROWS) -> list[dict]:
    """The first `limit` rows (the functions order them), tenant ids cut to a label's length."""
    return [dict(r, tenant_id=None if r["tenant_id"] is None else short_label(r["tenant_id"])) for r in rows[:limit]]


def share_text(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def cap_text(row: dict) -> str:
    return f"{row['running']} of {row['max_running'] if row['max_running'] is not None else '-'}"


def rate_text(row: dict) -> str:
    if row["per_second"] is None:
        return "-"
    return f"{row['per_second']:g}/s burst {row['burst']}"


def tenant_lines(rows: list[dict]) -> list[str]:
    """The tenants of pgsql-broker status: per queue and tenant, weight, ready, running and share served."""
    return [f"  tenant '{safe_text(r['tenant_id'])}' queue {r['job_queue']}: weight {r['weight']}, ready {r['ready']}, "
            f"running {r['running']}, served {r['served']} in the last minute ({share_text(r['share_served'])} of the queue)"
            for r in rows]


def limit_lines(rows: list[dict]) -> list[str]:
    """The limits of pgsql-broker status: per key and tenant, running and cap, rate and jobs waiting."""
    return [f"  limit '{safe_text(r['concurrency_key'])}' "
            + (ALL_TENANTS if r["tenant_id"] is None else f"tenant '{safe_text(r['tenant_id'])}'")
            + f": running {cap_text(r)}, rate {rate_text(r)}, waiting {r['waiting']}" for r in rows]
