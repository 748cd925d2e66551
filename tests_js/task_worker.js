'use strict';
// A pgsql_broker task worker in Node.js: plain SQL through node-postgres (pg), no other library.
// It follows the protocol of docs/tasks.md, whose worked example it is:
//
//   node task_worker.js --tenant a --count 4 --poll-ms 500 send_receipt [more task names]
//
// It connects with the PG* environment as a login that is a member of broker_worker (mapped to the
// tenant under strict tenancy), LISTENs on pgsql_broker_task, claims tasks of the given names and
// runs each: one heartbeat, then the task's write into task_effects and its completion in ONE
// transaction. A task whose args say {"fail_first": true} fails on its first attempt (its write
// rolled back, broker_fail_task with a retry) and completes on the next. After --count completions,
// or at SIGTERM/SIGINT, it hands back what it claimed and did not start (broker_release_task) and
// exits 0. Each line it prints on stdout is one JSON event (tests_py reads them).
const { Client } = require('pg');

function parseArgs(argv) {
  const opts = { tenant: null, count: null, pollMs: 500, tasks: [] };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--tenant') opts.tenant = argv[++i];
    else if (arg === '--count') opts.count = Number(argv[++i]);
    else if (arg === '--poll-ms') opts.pollMs = Number(argv[++i]);
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
    else opts.tasks.push(arg);
  }
  if (!opts.tenant || !Number.isInteger(opts.count) || opts.count < 1 || !Number.isInteger(opts.pollMs)
      || opts.pollMs < 1 || opts.tasks.length === 0) {
    throw new Error('usage: node task_worker.js --tenant TENANT --count N [--poll-ms MS] TASK [TASK ...]');
  }
  return opts;
}

const LEASE_SECONDS = 60;   // renewed by the heartbeat; bounds how long a crashed worker holds a task
const CLAIM_LIMIT = 10;

function say(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

// broker.tenant_id is transaction-local (broker_set_tenant): every call runs in a transaction
// that sets it first.
async function inTenant(client, tenant, work) {
  await client.query('BEGIN');
  try {
    await client.query('SELECT broker.broker_set_tenant($1)', [tenant]);
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

// The task's own work: a row in the test's table, written in the transaction given. A task whose
// args say fail_first writes, then throws on its first attempt: its write is rolled back.
async function handle(client, task) {
  await client.query('INSERT INTO task_effects (job_id, n, attempt) VALUES ($1, $2, $3)',
                     [task.job_id, task.args.n, task.attempt]);
  if (task.args.fail_first && task.attempt === 1) {
    throw new Error(`receipt ${task.args.n}: the mail server said 451, try again later`);
  }
  return { n: task.args.n, attempt: task.attempt };
}

async function fail(client, tenant, task, message, retry) {
  const { rows } = await inTenant(client, tenant, () => client.query(
    'SELECT broker.broker_fail_task($1, $2, $3, $4) AS ok', [task.job_id, task.lease_token, message, retry]));
  say({ event: 'failed', job_id: task.job_id, attempt: task.attempt, retry, recorded: rows[0].ok });
}

// One task: a heartbeat, then its writes and its completion in one transaction.
async function run(client, tenant, task) {
  const beat = await inTenant(client, tenant, () => client.query(
    'SELECT broker.broker_extend_task($1, $2, $3) AS answer', [task.job_id, task.lease_token, LEASE_SECONDS]));
  const heartbeat = beat.rows[0].answer;
  if (heartbeat === 'lost') {          // recovered, claimed again or ended: someone else's now
    say({ event: 'lost', job_id: task.job_id });
    return false;
  }
  if (heartbeat === 'cancelled') {     // a cancel request: stop and say so; the task ends cancelled
    await fail(client, tenant, task, 'cancelled while it ran', false);
    return false;
  }
  await client.query('BEGIN');
  try {
    await client.query('SELECT broker.broker_set_tenant($1)', [tenant]);
    const output = { ...(await handle(client, task)), heartbeat };
    const { rows } = await client.query('SELECT broker.broker_complete_task($1, $2, $3::jsonb) AS ok',
                                        [task.job_id, task.lease_token, JSON.stringify(output)]);
    if (!rows[0].ok) {                 // the lease was lost: the writes must not commit
      await client.query('ROLLBACK');
      say({ event: 'lost', job_id: task.job_id });
      return false;
    }
    await client.query('COMMIT');
    say({ event: 'completed', job_id: task.job_id, attempt: task.attempt, output });
    return true;
  } catch (err) {
    await client.query('ROLLBACK');    // the handler's writes go with the attempt
    // 57014: a cancel request came while it ran (broker_complete_task refused); broker_fail_task ends it cancelled
    await fail(client, tenant, task, err.message, err.code !== '57014');
    return false;
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const client = new Client({ application_name: 'task_worker.js' });
  let wake = null;
  let stopping = false;
  const nap = () => new Promise((resolve) => {
    const timer = setTimeout(resolve, opts.pollMs);   // the poll: a NOTIFY is only a hint
    wake = (why) => { clearTimeout(timer); wake = null; resolve(why); };
  });
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => { stopping = true; if (wake) wake(null); });
  }
  await client.connect();
  // payload '<database>/<negative queue>': a task name's queue has a task to claim
  client.on('notification', (msg) => { if (wake) wake(msg.payload); });
  await client.query('LISTEN pgsql_broker_task');
  say({ event: 'listening', tasks: opts.tasks });

  let done = 0;
  while (done < opts.count && !stopping) {
    const { rows } = await inTenant(client, opts.tenant, () => client.query(
      'SELECT job_id, task, args, attempt, lease_token FROM broker.broker_claim_tasks($1, $2, $3)',
      [opts.tasks, CLAIM_LIMIT, LEASE_SECONDS]));
    if (rows.length === 0) {
      say({ event: 'idle' });
      const payload = await nap();
      if (payload) say({ event: 'woken', payload });
      continue;
    }
    for (const task of rows) {
      if (done >= opts.count || stopping) {   // claimed, not started: handed back, no attempt counted
        const { rows: back } = await inTenant(client, opts.tenant, () => client.query(
          'SELECT broker.broker_release_task($1, $2) AS ok', [task.job_id, task.lease_token]));
        say({ event: 'released', job_id: task.job_id, recorded: back[0].ok });
      } else if (await run(client, opts.tenant, task)) {
        done += 1;
      }
    }
  }
  await client.end();
  say({ event: 'done', completed: done });
}

main().catch((err) => {
  process.stderr.write(`task_worker.js: ${err.code ? `${err.code} ` : ''}${err.message}\n`);
  process.exit(1);
});
