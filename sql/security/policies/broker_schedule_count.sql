-- sql/security/policies/broker_schedule_count.sql: row-level security of broker.broker_schedule_count: no policy, no grant (only the quota trigger, SECURITY DEFINER, touches it).
ALTER TABLE broker.broker_schedule_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schedule_count FORCE ROW LEVEL SECURITY;
