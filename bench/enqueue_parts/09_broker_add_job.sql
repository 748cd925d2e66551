SELECT job_id FROM broker.broker_add_job('single', 'SELECT 1');
