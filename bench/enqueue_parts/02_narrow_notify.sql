INSERT INTO parts.narrow_trg (entrypoint) VALUES ('noop') RETURNING id;
