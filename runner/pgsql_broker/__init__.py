"""pgsql_broker: a PostgreSQL job broker. The extension does the work; this package installs it."""

__version__ = "0.2.0"
