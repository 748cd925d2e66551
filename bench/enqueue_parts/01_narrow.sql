INSERT INTO parts.narrow (entrypoint) VALUES ('noop') RETURNING id;
