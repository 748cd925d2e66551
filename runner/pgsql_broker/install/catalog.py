"""A normalised text snapshot of everything pgsql_broker defines in a database.

Used to prove that both install paths and every upgrade path produce the same
schema, and by ``pgsql-broker install --verify-only`` to find missing or
changed objects. Owners are left out (they differ by path until roles.sql
runs); privileges, and the policies that name a role (roles.sql makes them), are
included on request with the owner written as <owner>.
"""
from __future__ import annotations

import psycopg

SCHEMAS = ("broker",)  # job executors live in per-role schemas made at run time: not part of it

_SECTIONS: dict[str, str] = {
    "schemas": """
        SELECT n.nspname || ' comment=' || coalesce(obj_description(n.oid, 'pg_namespace'), '')
          FROM pg_namespace n WHERE n.nspname = ANY(%(schemas)s)""",
    "functions": """
        SELECT pg_get_functiondef(p.oid) || ' -- comment: ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
          FROM pg_proc p WHERE p.pronamespace = 'broker'::regnamespace""",
    "relations": """
        SELECT c.relname || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity || ' force=' || c.relforcerowsecurity
               || ' options=' || coalesce(array_to_string(c.reloptions, ','), '')
               || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '')
          FROM pg_class c WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')""",
    "columns": """
        SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
               || ' notnull=' || a.attnotnull || ' identity=' || a.attidentity::text
               || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
               || ' comment=' || coalesce(col_description(c.oid, a.attnum), '')
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped""",
    "indexes": """
        SELECT pg_get_indexdef(i.indexrelid) || ' -- comment: ' || coalesce(obj_description(i.indexrelid, 'pg_class'), '')
          FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
         WHERE c.relnamespace = 'broker'::regnamespace""",
    # types other than a relation's row type and arrays: composite types with their attributes in order
    # (a row constructor depends on it), enums and domains
    "types": """
        SELECT t.typname || ' type=' || t.typtype::text
               || ' attributes=' || coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                                                                ORDER BY a.attnum)
                                                FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0
                                                 AND NOT a.attisdropped), '')
               || ' comment=' || coalesce(obj_description(t.oid, 'pg_type'), '')
          FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
         WHERE t.typnamespace = 'broker'::regnamespace AND t.typelem = 0 AND coalesce(c.relkind, 'c') = 'c'""",
    # (PostgreSQL 18 also records each NOT NULL as a constraint, contype 'n'; columns' notnull= has them on every
    # version, so the snapshot is the same on 15 to 18)
    "constraints": """
        SELECT c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
         WHERE c.relnamespace = 'broker'::regnamespace AND k.contype <> 'n'""",
    "triggers": """
        SELECT pg_get_triggerdef(t.oid) || ' -- comment: ' || coalesce(obj_description(t.oid, 'pg_trigger'), '')
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'broker'::regnamespace AND NOT t.tgisinternal""",
    "policies": """
        SELECT c.relname || ' ' || p.polname || ' cmd=' || p.polcmd::text || ' permissive=' || p.polpermissive
               || ' roles=' || array_to_string(ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE r::regrole::text END
                                                       FROM unnest(p.polroles) r ORDER BY 1), ',')
               || ' using=' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
               || ' check=' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
               || ' comment=' || coalesce(obj_description(p.oid, 'pg_policy'), '')
          FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
         WHERE c.relnamespace = 'broker'::regnamespace AND p.polroles = '{0}'""",
    "sequences": """
        SELECT s.seqrelid::regclass::text || ' ' || s.seqtypid::regtype || ' ' || s.seqstart || ' ' || s.seqincrement
          FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = 'broker'::regnamespace""",
}

_PRIVILEGES: dict[str, str] = {
    # policies naming a role (broker_admin_all) are roles.sql's, made once the role exists, like the grants
    "role policies": """
        SELECT c.relname || ' ' || p.polname || ' cmd=' || p.polcmd::text || ' permissive=' || p.polpermissive
               || ' roles=' || array_to_string(ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE r::regrole::text END
                                                       FROM unnest(p.polroles) r ORDER BY 1), ',')
               || ' using=' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
               || ' check=' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
               || ' comment=' || coalesce(obj_description(p.oid, 'pg_policy'), '')
          FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
         WHERE c.relnamespace = 'broker'::regnamespace AND p.polroles <> '{0}'""",
    "schema privileges": """
        SELECT n.nspname || ' ' || coalesce(replace(n.nspacl::text, n.nspowner::regrole::text, '<owner>'), 'default')
          FROM pg_namespace n WHERE n.nspname = ANY(%(schemas)s)""",
    "relation privileges": """
        SELECT c.relname || ' ' || coalesce(replace(c.relacl::text, c.relowner::regrole::text, '<owner>'), 'default')
          FROM pg_class c WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')""",
    "column privileges": """
        SELECT c.relname || '.' || a.attname || ' ' || replace(a.attacl::text, c.relowner::regrole::text, '<owner>')
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace = 'broker'::regnamespace AND a.attacl IS NOT NULL""",
    "function privileges": """
        SELECT p.oid::regprocedure::text || ' ' || coalesce(replace(p.proacl::text, p.proowner::regrole::text, '<owner>'), 'default')
          FROM pg_proc p WHERE p.pronamespace = 'broker'::regnamespace""",
}


def snapshot(conn: psycopg.Connection, privileges: bool = False) -> dict[str, list[str]]:
    """Sorted definitions per section; empty lists when pgsql_broker is not installed."""
    sections = dict(_SECTIONS, **(_PRIVILEGES if privileges else {}))
    with conn.cursor() as cur:
        cur.execute("SELECT to_regnamespace('broker') IS NOT NULL")
        if not cur.fetchone()[0]:
            return {name: [] for name in sections}
        result = {}
        for name, query in sections.items():
            cur.execute(query, {"schemas": list(SCHEMAS)})
            result[name] = sorted(row[0] for row in cur.fetchall())
    return result


def differences(expected: dict[str, list[str]], actual: dict[str, list[str]]) -> list[str]:
    """Human-readable lines: '- missing: …' and '+ unexpected: …' per section."""
    lines = []
    for section in sorted(set(expected) | set(actual)):
        want, have = set(expected.get(section, [])), set(actual.get(section, []))
        lines += [f"{section}: missing or changed: {_first_line(x)}" for x in sorted(want - have)]
        lines += [f"{section}: unexpected or changed: {_first_line(x)}" for x in sorted(have - want)]
    return lines


def _first_line(definition: str) -> str:
    line = definition.strip().splitlines()[0]
    return line if len(line) <= 160 else line[:157] + "..."


def main() -> None:
    """python -m pgsql_broker.install.catalog DBNAME: print the snapshot of a database as JSON (PG* variables apply)."""
    import json
    import sys

    with psycopg.connect(dbname=sys.argv[1]) as conn:
        json.dump(snapshot(conn), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
