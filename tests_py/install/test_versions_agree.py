"""The version lives in pgsql_broker.control; everything else must agree with it."""
from __future__ import annotations

import re
from importlib.metadata import version as dist_version
from pathlib import Path

import pgsql_broker
from pgsql_broker.install.scripts import control_version, scripts, version_key

ROOT = Path(__file__).resolve().parents[2]


def test_control_package_scripts_and_changelog_agree():
    control = re.search(r"^default_version\s*=\s*'([^']+)'", (ROOT / "pgsql_broker.control").read_text(), re.M).group(1)
    newest_script = max((s.to_version for s in scripts() if s.from_version is None), key=version_key)
    changelog = re.search(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    dockerfile = re.search(r"^ARG VERSION=(\S+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    from pgsql_broker.run.database import SUPPORTED_SCHEMA
    assert control in SUPPORTED_SCHEMA, "the runner must support the schema it ships"
    assert {
        "control file": control,
        "packaged control file": control_version(),
        "newest full extension script": newest_script,
        "pgsql_broker.__version__": pgsql_broker.__version__,
        "installed distribution": dist_version("pgsql-broker"),
        "CHANGELOG (latest entry)": changelog,
        "Dockerfile ARG VERSION": dockerfile,
    } == dict.fromkeys(["control file", "packaged control file", "newest full extension script",
                        "pgsql_broker.__version__", "installed distribution", "CHANGELOG (latest entry)",
                        "Dockerfile ARG VERSION"], control)


def test_every_upgrade_step_exists():
    full = sorted((s.to_version for s in scripts() if s.from_version is None), key=version_key)
    steps = {(s.from_version, s.to_version) for s in scripts() if s.from_version}
    for older, newer in zip(full, full[1:]):
        assert (older, newer) in steps, f"missing extension/pgsql_broker--{older}--{newer}.sql"
