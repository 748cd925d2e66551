-- ---------------------------------------------------------------------------
-- Privileges. Nothing in schema broker is usable by PUBLIC: the extension
-- owner (a superuser) uses it directly, and other roles get exactly what
-- they are granted (role setup: see README, "Security model").
-- ---------------------------------------------------------------------------
REVOKE ALL ON SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA broker FROM PUBLIC;
