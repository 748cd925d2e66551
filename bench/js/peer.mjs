// Graphile Worker and pg-boss in the common workloads of bench/workloads.py (driven by
// bench/peers/js_workloads.py; run with the Node 22 of bench/.node, see the Makefile).
//
//   node peer.mjs SYSTEM install                     schema (and queue) in PGDATABASE
//   node peer.mjs SYSTEM preload N                   N jobs by the batch API, 1,000 a call
//   node peer.mjs SYSTEM enqueue SINGLE BATCHES SIZE prints {"single": {...}, "batch 1000": {...}}
//   node peer.mjs SYSTEM one                         one job, prints its id
//   node peer.mjs SYSTEM latency N INTERVAL_MS       one job every ~INTERVAL_MS, prints {id: t0}
//   node peer.mjs SYSTEM worker OUTFILE              runs until SIGTERM, then writes {id: start}
//
// SYSTEM: graphile (Graphile Worker at its defaults), pgboss (pg-boss at its defaults) or
// pgboss-tuned (pg-boss with the opt-ins its docs give for latency and throughput; see TUNED).
// Connections: the libpq variables (PGHOST = the socket directory, PGPORT, PGUSER, PGDATABASE).
// Times are epoch seconds (performance.timeOrigin + performance.now(), sub-millisecond).
import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

const QUEUE = "noop";
const env = process.env;
const CONN = `postgres://${encodeURIComponent(env.PGUSER || "postgres")}@/${encodeURIComponent(env.PGDATABASE)}`
  + `?host=${encodeURIComponent(env.PGHOST || "/var/run/postgresql")}&port=${env.PGPORT || 5432}`;
// pg-boss opt-ins from its docs (api/workers.md): LISTEN/NOTIFY needs both useListenNotify on the
// instance and notify on the queue; batchSize and burstWhenBatchFull let one worker keep fetching
// while batches come back full (at the defaults a worker takes 1 job every 2 seconds).
const TUNED = { batchSize: Number(env.BENCH_PGBOSS_BATCH || 10), burstWhenBatchFull: true };
const now = () => (performance.timeOrigin + performance.now()) / 1000;

async function graphile() {
  const { Logger, makeWorkerUtils, run } = await import("graphile-worker");
  // warnings and errors only, as every system here logs (its default logger writes a line per job)
  const logger = new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`graphile-worker ${level}: ${message}`);
  });
  return {
    async install() {
      const utils = await makeWorkerUtils({ connectionString: CONN, logger });
      await utils.migrate();
      await utils.release();
    },
    async client() {
      // WorkerUtils: the docs' way to add jobs from a long-lived process (quickAddJob/addJobAdhoc
      // set up and tear down a connection per call)
      const utils = await makeWorkerUtils({ connectionString: CONN, logger });
      return {
        one: async () => String((await utils.addJob(QUEUE, {})).id),
        batch: async (n) => { await utils.addJobs(Array.from({ length: n }, () => ({ identifier: QUEUE, payload: {} }))); },
        close: () => utils.release(),
      };
    },
    async worker(starts) {
      // every option at its default (concurrentJobs 1, pollInterval 2000 with LISTEN/NOTIFY, no localQueue);
      // noHandleSignals: the SIGTERM handler below stops the runner (one shutdown path)
      const runner = await run({
        connectionString: CONN,
        logger,
        noHandleSignals: true,
        taskList: { [QUEUE]: async (_payload, helpers) => { starts[helpers.job.id] = now(); } },
      });
      return () => runner.stop();
    },
  };
}

async function pgboss(tuned) {
  const { PgBoss } = await import("pg-boss");
  const boss = async () => {
    const b = new PgBoss(tuned ? { connectionString: CONN, useListenNotify: true } : CONN);
    b.on("error", (e) => console.error("pg-boss:", e.message));
    await b.start();
    return b;
  };
  return {
    async install() {
      const b = await boss();
      await b.createQueue(QUEUE, tuned ? { notify: true } : {});
      await b.stop({ graceful: false });
    },
    async client() {
      const b = await boss();
      return {
        one: async () => String(await b.send(QUEUE, {})),
        batch: async (n) => { await b.insert(QUEUE, Array.from({ length: n }, () => ({ data: {} }))); },
        close: () => b.stop({ graceful: false }),
      };
    },
    async worker(starts) {
      const b = await boss();
      await b.work(QUEUE, tuned ? TUNED : {}, async (jobs) => {
        const t = now();
        for (const job of jobs) starts[job.id] = t;
      });
      return () => b.stop({ graceful: true, wait: true });
    },
  };
}

async function timedLoop(call, count, perCall) {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await call();
  const seconds = (performance.now() - t0) / 1000;
  return { jobs: count * perCall, seconds, jobs_per_s: (count * perCall) / seconds };
}

async function main() {
  const [system, command, ...args] = process.argv.slice(2);
  const sys = system === "graphile" ? await graphile()
    : system === "pgboss" ? await pgboss(false)
    : system === "pgboss-tuned" ? await pgboss(true)
    : null;
  if (!sys) throw new Error(`unknown system ${system}`);
  if (command === "install") return sys.install();
  if (command === "worker") {
    const starts = {};
    const stop = await sys.worker(starts);
    let stopping = false;
    const onSignal = async () => {
      if (stopping) return;
      stopping = true;
      writeFileSync(args[0], JSON.stringify(starts)); // first: the jobs are done when the harness stops us
      await stop();
      process.exit(0);
    };
    process.prependListener("SIGTERM", onSignal);
    process.prependListener("SIGINT", onSignal);
    console.error(`${system} worker ready`);
    return new Promise(() => {});
  }
  const client = await sys.client();
  try {
    if (command === "preload") {
      const n = Number(args[0]);
      for (let done = 0; done < n; done += 1000) await client.batch(Math.min(1000, n - done));
    } else if (command === "one") {
      process.stdout.write(await client.one() + "\n");
    } else if (command === "enqueue") {
      const [single, batches, size] = args.map(Number);
      const out = { single: await timedLoop(client.one, single, 1) };
      out[`batch ${size}`] = await timedLoop(() => client.batch(size), batches, size);
      process.stdout.write(JSON.stringify(out) + "\n");
    } else if (command === "latency") {
      const [n, intervalMs] = args.map(Number);
      const t0s = {};
      for (let i = 0; i < n; i++) {
        const t0 = now();
        t0s[await client.one()] = t0;
        await sleep(intervalMs);
      }
      process.stdout.write(JSON.stringify(t0s) + "\n");
    } else {
      throw new Error(`unknown command ${command}`);
    }
  } finally {
    await client.close();
  }
}

main().then((r) => { if (r === undefined) process.exit(0); }, (e) => { console.error(e); process.exit(1); });
