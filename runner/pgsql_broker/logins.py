"""Which roles a login is or can become that would let it escape its grants: the runner refuses such a login
(run/login.py) unless told otherwise, and a task worker warns of one (tasks/worker.py), whose handlers write with
its rights."""
from __future__ import annotations

import psycopg

# Roles a broker login must not be or be a member of: what could bypass row-level security (BYPASSRLS, or
# broker_admin, which every table's policy broker_admin_all lets read and write every tenant's rows), make
# itself one of those (CREATEROLE grants itself any non-superuser role, broker_admin too), read the cluster
# through replication, or act as the server's OS user or on every table (predefined roles).
PRIVILEGED_LOGIN = """SELECT string_agg(format('%%I (%%s)', r.rolname, concat_ws(', ',
                                  CASE WHEN r.rolsuper THEN 'superuser' END, CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
                                  CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END, CASE WHEN r.rolreplication THEN 'REPLICATION' END,
                                  CASE WHEN r.rolname = ANY (%(predefined)s) THEN 'server files, programs or every table' END,
                                  CASE WHEN r.rolname = 'broker_admin' THEN 'owns the broker, reads every tenant' END)),
                              '; ' ORDER BY r.rolname <> current_user, r.rolname)
                        FROM pg_catalog.pg_roles AS r
                       WHERE (r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolreplication
                              OR r.rolname = ANY (%(predefined)s) OR r.rolname = 'broker_admin')
                         AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')"""
PRIVILEGED_PREDEFINED = ["pg_execute_server_program", "pg_write_server_files", "pg_read_server_files",
                         "pg_read_all_data", "pg_write_all_data"]


async def privileged_roles(conn: psycopg.AsyncConnection) -> str | None:
    """The roles of PRIVILEGED_LOGIN that the login is or can become (by membership), with why each is one; None
    when there is none."""
    return (await (await conn.execute(PRIVILEGED_LOGIN, {"predefined": PRIVILEGED_PREDEFINED})).fetchone())[0]
