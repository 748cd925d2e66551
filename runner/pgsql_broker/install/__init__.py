"""Installing the schema: install or upgrade (installer.py), the versioned scripts (scripts.py), the expected
catalog (catalog.py) and the installer's credentials (credentials.py). Never imports run/."""

__all__ = ["InstallError", "apply_roles", "expected_catalog", "install", "verify"]


def __getattr__(name: str):  # imported lazily, so that `python -m pgsql_broker.install.catalog` runs it first
    if name in __all__:
        from . import installer
        return getattr(installer, name)
    raise AttributeError(name)
