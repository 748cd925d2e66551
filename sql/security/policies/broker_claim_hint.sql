-- sql/security/policies/broker_claim_hint.sql: row-level security of broker.broker_claim_hint: no policy, no grant (only broker_get, SECURITY DEFINER, touches it).
ALTER TABLE broker.broker_claim_hint ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_claim_hint FORCE ROW LEVEL SECURITY;
