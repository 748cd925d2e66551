"""pgsql_broker: a PostgreSQL job broker. The extension does the work; this package installs it."""

__version__ = "0.3.0"

__all__ = ["Broker", "Settings", "enqueue", "load_settings", "__version__"]


def __getattr__(name: str):  # the library API, imported lazily (the install CLI does not need it)
    if name in ("Broker", "enqueue"):
        from . import broker
        return getattr(broker, name)
    if name in ("Settings", "load_settings"):
        from . import settings
        return {"Settings": settings.Settings, "load_settings": settings.load}[name]
    raise AttributeError(name)
