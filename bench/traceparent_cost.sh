#!/usr/bin/env bash
# What broker_jobs.traceparent (its default reads the setting broker.traceparent) costs an enqueue:
# the extension built from BASE_SCRIPT (the script before the column) and the one installed now, in two
# databases of one cluster, measured in turns with pgbench (one client): broker_add_job per call, and
# broker_add_jobs of 100 jobs per call, without and with a traceparent set (the base ignores the setting). Not a test.
#   PGBROKER_TEST_FSYNC=off PGBIN=... .ci/with-cluster bench/traceparent_cost.sh /tmp/base-ext.sql  (fsync off: the CPU cost, not the flush)
set -euo pipefail
base_script=$1
share=$("$PGBIN/pg_config" --sharedir)/extension
current=$(ls "$share"/pgsql_broker--0.2.0.sql)
cp "$current" /tmp/traceparent_cost.current.sql
cp "$base_script" "$current"
createdb base && psql -X -q -d base -c 'CREATE EXTENSION pgsql_broker' >/dev/null
cp /tmp/traceparent_cost.current.sql "$current"
createdb new && psql -X -q -d new -c 'CREATE EXTENSION pgsql_broker' >/dev/null
dir=$(mktemp -d)
echo "SELECT broker.broker_add_job('b', 'SELECT 1');" > "$dir/one.sql"
echo "SELECT count(*) FROM broker.broker_add_jobs((SELECT jsonb_agg(jsonb_build_object('job_name', 'b', 'execute_str', 'SELECT 1')) FROM generate_series(1, 100)));" > "$dir/many.sql"
{ echo "BEGIN;"; echo "SET LOCAL broker.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';"
  cat "$dir/one.sql"; echo "COMMIT;"; } > "$dir/one_traced.sql"
{ echo "BEGIN;"; echo "SET LOCAL broker.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';"
  cat "$dir/many.sql"; echo "COMMIT;"; } > "$dir/many_traced.sql"
tps() {  # database, script, transactions
    psql -X -q -d "$1" -c 'TRUNCATE broker.broker_jobs CASCADE' >/dev/null
    "$PGBIN/pgbench" -n -c 1 -t "$3" -f "$dir/$2" "$1" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
for round in 1 2 3 4; do
    for case in "one.sql 4000" "many.sql 200"; do
        set -- $case
        b=$(tps base "$1" "$2"); n=$(tps new "$1" "$2")
        tb=$(tps base "${1%.sql}_traced.sql" "$2"); tn=$(tps new "${1%.sql}_traced.sql" "$2")
        echo "round $round $1: base $b tps, new $n tps (new/base $(echo "scale=3; $n / $b" | bc));" \
             "with SET LOCAL broker.traceparent: base $tb, new $tn (new/base $(echo "scale=3; $tn / $tb" | bc))"
    done
done
rm -rf "$dir"
