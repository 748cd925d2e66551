"""Installing the schema: install or upgrade (installer.py), the versioned scripts (scripts.py), the expected
catalog (catalog.py) and the installer's credentials (credentials.py). Never imports run/."""
from .installer import InstallError, apply_roles, expected_catalog, install, verify

__all__ = ["InstallError", "apply_roles", "expected_catalog", "install", "verify"]
