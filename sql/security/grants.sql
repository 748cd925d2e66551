-- sql/security/grants.sql: privileges: nothing for PUBLIC (the broker roles get theirs from sql/roles.sql).
-- ---------------------------------------------------------------------------
-- Privileges. Nothing in schema broker is usable by PUBLIC: the extension
-- owner (a superuser) uses it directly, and other roles get exactly what
-- they are granted: sql/roles.sql creates broker_admin, broker_runtime and
-- broker_enqueue and holds every grant (README, "Security model").
-- ---------------------------------------------------------------------------
REVOKE ALL ON SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA broker FROM PUBLIC;
