"""The versioned SQL scripts shipped in this package and how each install path uses them.

``extension/`` holds the extension's scripts exactly as PostgreSQL reads them:
full scripts ``pgsql_broker--X.Y.Z.sql`` (one per frozen release and one for
the current version) and hand-written upgrades ``pgsql_broker--A--B.sql``.
The migrations path applies the oldest full script and then the upgrades in
order, so a database gets the same objects whichever way it is installed.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .. import __version__

EXTENSION = "pgsql_broker"
_SCRIPT_RE = re.compile(r"^pgsql_broker--(\d+\.\d+\.\d+)(?:--(\d+\.\d+\.\d+))?\.sql$")
_EXTENSION_ONLY_RE = re.compile(r"^-- <extension-only>.*?^-- </extension-only>\n", re.S | re.M)
_PSQL_GUARD_RE = re.compile(r"^\\echo .*\\quit\n", re.M)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class Script:
    """One file of extension/: a full install (from_version None) or an upgrade."""

    name: str
    to_version: str
    from_version: str | None = None

    @property
    def text(self) -> str:
        return (resources.files("pgsql_broker") / "extension" / self.name).read_text()

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def migration_id(self) -> str:
        return self.name.removesuffix(".sql")


def control_version() -> str:
    """default_version from pgsql_broker.control: the one source of the version (read by the package)."""
    return __version__


@cache
def scripts() -> tuple[Script, ...]:
    found = []
    for entry in (resources.files("pgsql_broker") / "extension").iterdir():
        match = _SCRIPT_RE.match(entry.name)
        if match:
            first, second = match.groups()
            found.append(Script(entry.name, second or first, first if second else None))
    return tuple(sorted(found, key=lambda s: (version_key(s.to_version), s.from_version is not None)))


def migration_chain(target: str | None = None) -> list[Script]:
    """Oldest full script, then one upgrade at a time up to target (default: the control version)."""
    target = target or control_version()
    full = [s for s in scripts() if s.from_version is None]
    if not full:
        raise RuntimeError("no full extension script is packaged")
    chain = [full[0]]
    upgrades = [s for s in scripts() if s.from_version is not None]
    while version_key(chain[-1].to_version) < version_key(target):
        step = [s for s in upgrades if s.from_version == chain[-1].to_version]
        if not step:
            raise RuntimeError(f"no upgrade script from {chain[-1].to_version} towards {target}")
        chain.append(min(step, key=lambda s: version_key(s.to_version)))
    if chain[-1].to_version != target:
        raise RuntimeError(f"the upgrade chain overshoots {target}")
    return chain


def migration_sql(script: Script) -> str:
    """The script as a tracked migration: no psql guard, no CREATE EXTENSION-only parts,
    the schema created first for a full script, and the version recorded last."""
    body = _EXTENSION_ONLY_RE.sub("", _PSQL_GUARD_RE.sub("", script.text))
    if script.from_version is None:
        body = "CREATE SCHEMA broker;\n" + body
    # as CREATE EXTENSION does: function bodies may refer to objects created later in the script
    body = "SET LOCAL check_function_bodies = off;\n" + _force_rls("NO FORCE", "relforcerowsecurity") + body
    return body + _force_rls("NO FORCE", "relforcerowsecurity") + (
        "INSERT INTO broker.broker_schema_migrations (version, install_path, checksum) "
        f"VALUES ('{script.to_version}', 'migrations', '{script.checksum}');\n"
    ) + _force_rls("FORCE", "relrowsecurity")


def _force_rls(action: str, having: str) -> str:
    """ALTER TABLE ... {action} ROW LEVEL SECURITY on every table of schema broker that has `having`.

    Every broker table forces row-level security on its owner too. A superuser bypasses it; a database
    owner that installs without superuser or BYPASSRLS (managed PostgreSQL) would see and change only the
    default tenant's rows (and could not record the version): for the migration's own transaction the
    owner's exemption is back, and at its end every table with row security forces it again."""
    return f"""
DO $rls$
DECLARE r record;
BEGIN
    FOR r IN SELECT c.oid::pg_catalog.regclass AS rel FROM pg_catalog.pg_class AS c
              WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('broker')
                AND c.relkind OPERATOR(pg_catalog.=) 'r' AND c.{having}
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s {action} ROW LEVEL SECURITY', r.rel);
    END LOOP;
END
$rls$;
"""


def roles_sql() -> str:
    return (resources.files("pgsql_broker") / "roles.sql").read_text()
