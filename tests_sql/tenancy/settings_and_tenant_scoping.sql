-- broker_set, broker_set_tenant, and per-tenant scoping of groups, dependencies and cycles.
BEGIN;
SELECT plan(16);

SELECT is(broker.broker_current_tenant(), 'default', 'no tenant set: default');
SELECT is(broker.broker_set_tenant('acme'), 'acme', 'broker_set_tenant returns the tenant');
SELECT is(broker.broker_current_tenant(), 'acme', 'now acting for acme');
SELECT is(current_setting('broker.tenant_id'), 'acme', 'as the broker.tenant_id GUC');
SELECT throws_ok($$SELECT broker.broker_set_tenant(NULL)$$, '22004', NULL, 'NULL tenant: 22004');
SELECT throws_ok($$SELECT broker.broker_set_tenant(' ')$$, '22023', NULL, 'blank tenant: 22023');
SELECT is(broker.broker_set('tenant_id', 'beta'), 'beta', 'broker_set(tenant_id) is broker_set_tenant');

-- groups and id dependencies are per tenant
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('extract', 'SELECT 1');
CREATE TEMP TABLE acme_job AS SELECT job_id FROM broker.broker_add_job('acme only', 'SELECT 1');
SELECT broker.broker_set_tenant('beta');
CREATE TEMP TABLE beta_job AS SELECT job_id FROM broker.broker_add_job_simple('transform', 'SELECT 1', 0, ARRAY['extract']);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM beta_job)), 0,
          'another tenant''s group does not block');
SELECT throws_ok(format('SELECT broker.broker_add_job(''x'', ''SELECT 1'', p_depends_on_job_ids => ARRAY[%s]::bigint[])',
                        (SELECT job_id FROM acme_job)), '23503', NULL, 'another tenant''s job id does not exist for us');
SELECT is((SELECT tenant_id FROM broker.broker_jobs WHERE job_name = 'transform'), 'beta', 'new jobs take the caller''s tenant');

-- cycle checks are per tenant: the same group names in two tenants do not form a cycle
SELECT broker.broker_add_job('p', 'SELECT 1', p_job_group => 'P', p_depends_on_groups => ARRAY['Q']);
SELECT broker.broker_set_tenant('acme');
SELECT lives_ok($$SELECT broker.broker_add_job('q', 'SELECT 1', p_job_group => 'Q', p_depends_on_groups => ARRAY['P'])$$,
    'mirror-image edges in two tenants are not a cycle');

-- broker_set options
SELECT is(broker.broker_set('lease_seconds', '30', true), '30', 'lease_seconds set');
SELECT is(broker.broker_set('application_name', 'my-worker', true), 'my-worker', 'application_name set');
SELECT is(current_setting('application_name'), 'my-worker', 'and in force');
SELECT throws_ok($$SELECT broker.broker_set('no_such', '1')$$, '22023', NULL, 'unknown option: 22023');
SELECT throws_ok($$SELECT broker.broker_set('lease_seconds', 'soon')$$, '22023', NULL, 'invalid value: 22023');

SELECT * FROM finish();
ROLLBACK;
