-- broker_set_tenant in an autocommit statement of its own ends with it, so it warns; inside BEGIN ... COMMIT,
-- or among other statements of one message, it does not. The decision is broker._whole_transaction, given the
-- server's statement and transaction start times and the query text (the times are handed in here);
-- tests_py/integration/test_set_tenant_warns_alone.py sees the warning itself, from psql in autocommit and inside BEGIN.
BEGIN;
SELECT plan(8);

SELECT is(broker._whole_transaction('2030-01-01 10:00:00+00', '2030-01-01 10:00:00+00', $$SELECT broker.broker_set_tenant('acme')$$),
          true, 'the transaction began with the message, which holds this statement alone: its own transaction');
SELECT is(broker._whole_transaction('2030-01-01 10:00:00+00', '2030-01-01 10:00:00+00', E'SELECT broker.broker_set_tenant(''acme'');\n'),
          true, 'a trailing semicolon (psql sends it) is one statement still');
SELECT is(broker._whole_transaction('2030-01-01 10:00:01+00', '2030-01-01 10:00:00+00', $$SELECT broker.broker_set_tenant('acme')$$),
          false, 'a transaction begun by an earlier message (BEGIN): not its own');
SELECT is(broker._whole_transaction('2030-01-01 10:00:00+00', '2030-01-01 10:00:00+00',
                                    $$BEGIN; SELECT broker.broker_set_tenant('acme'); SELECT 1; COMMIT$$),
          false, 'several statements in one message share its transaction: not its own');
SELECT is(broker._whole_transaction('2030-01-01 10:00:00+00', '2030-01-01 10:00:00+00', NULL), true,
          'no query text: judged by the times');

-- live, inside this transaction (pg_prove sends BEGIN on its own): no warning
SELECT is(broker._whole_transaction(statement_timestamp(), transaction_timestamp(), current_query()), false,
          'inside BEGIN, the live values say: not its own transaction');
SELECT is(broker.broker_set_tenant('acme'), 'acme', 'broker_set_tenant inside BEGIN sets the tenant');
SELECT is(broker.broker_current_tenant(), 'acme', 'for the rest of the transaction');

SELECT * FROM finish();
ROLLBACK;
