"""Real logins for the security tests: enqueue logins mapped to their own tenants, runtime logins."""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

from conftest import connect


@contextmanager
def tenant_logins(db: str, enqueuers: dict[str, str | None], runtime: tuple[str, ...] = ("runner",),
                  strict: bool = True, workers: dict[str, str | None] | None = None) -> Iterator[dict[str, str]]:
    """LOGIN roles named after the keys (with a random suffix): each enqueuer a member of broker_enqueue
    and each worker a member of broker_worker, mapped to its tenant (the value; None: no mapping), each
    runtime name a member of broker_runtime; strict tenancy on when `strict`. Yields {key: role name};
    drops what they own and the roles after."""
    workers = workers or {}
    suffix = uuid.uuid4().hex[:8]
    names = {key: f"{key}_{suffix}" for key in (*enqueuers, *workers, *runtime)}
    with connect("postgres") as admin:
        for key in enqueuers:
            admin.execute(f'CREATE ROLE "{names[key]}" LOGIN IN ROLE broker_enqueue')
        for key in workers:
            admin.execute(f'CREATE ROLE "{names[key]}" LOGIN IN ROLE broker_worker')
        for key in runtime:
            admin.execute(f'CREATE ROLE "{names[key]}" LOGIN IN ROLE broker_runtime')
    try:
        with connect(db) as owner:
            if strict:
                owner.execute("SELECT broker.broker_set_strict_tenancy(true)")
            for key, tenant in {**enqueuers, **workers}.items():
                if tenant is not None:
                    owner.execute("INSERT INTO broker.broker_tenant_roles VALUES (%s, %s)", (tenant, names[key]))
        yield names
    finally:
        with connect(db) as owner:
            for name in names.values():
                owner.execute(f'DROP OWNED BY "{name}"')
        with connect("postgres") as admin:
            for name in names.values():
                admin.execute(f'DROP ROLE "{name}"')


def enqueue_as(db: str, user: str, tenant: str, name: str, sql: str, priority: int = 0,
               timeout: str | None = None) -> int:
    """broker_add_job as `user` for `tenant` (max_attempts 1) in a transaction of its own; the job id."""
    with connect(db, user=user, autocommit=False) as conn:
        conn.execute("SELECT broker.broker_set_tenant(%s)", (tenant,))
        job = conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s, p_job_priority => %s, "
                           "p_max_attempts => 1, p_timeout => %s::interval)",
                           (name, sql, priority, timeout)).fetchone()[0]
        conn.commit()
        return job
