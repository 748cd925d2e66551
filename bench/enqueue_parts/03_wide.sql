INSERT INTO parts.wide (job_name, job_group, execute_str) VALUES ('single', 'single', 'SELECT 1') RETURNING job_id;
