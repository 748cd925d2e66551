-- sql/security/policies/broker_finished_count.sql: row-level security of broker.broker_finished_count: no policy, no grant (only its triggers and broker_queue_stats, SECURITY DEFINER, touch it).
ALTER TABLE broker.broker_finished_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_finished_count FORCE ROW LEVEL SECURITY;
