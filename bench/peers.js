// bench/peers.js: the Node.js side of bench/run.
//
//   node peers.js graphile-drain  N CONCURRENCY
//   node peers.js pgboss-drain    N BATCH WORKERS
//   node peers.js latency         retries|graphile SAMPLES
//   node peers.js wake            cancel|worker SAMPLES
//   node peers.js graphile-migrate
//
// The connection comes from BENCH_DSN.  The drains work N jobs whose task
// runs `SELECT work($1)` and return once the results table holds N rows and
// the peer has finished its jobs; bench/run measures the rate from the
// results table, the same way for every contender.  pg-boss's drain
// enqueues its jobs; graphile-worker's are enqueued by bench/run, with the
// same add_jobs() statement whose speed it measures.  `latency` schedules
// single calls of work_lat() one at a time into an idle system and writes
// the commit time of each into lat_sched; work_lat() writes its start time
// into lat_started.  `wake` measures how soon retries.wait() returns after
// the commit that finishes the call, into wake_ms.  `graphile-migrate`
// installs graphile-worker's schema and empties its queue.

'use strict';

const { Pool } = require('pg');

const DSN = process.env.BENCH_DSN;
if (!DSN) {
	console.error('peers.js: BENCH_DSN is not set');
	process.exit(2);
}

const quietLogger = () => {
	const { Logger } = require('graphile-worker');
	return new Logger(() => (level, message) => {
		if (level === 'error')
			console.error(`graphile-worker: ${message}`);
	});
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// waitFor: poll `sql` (one row, one boolean column) until it is true; fail
// after `seconds`.
async function waitFor(pool, sql, seconds, what) {
	const deadline = Date.now() + seconds * 1000;
	for (;;) {
		const { rows } = await pool.query(sql);
		if (Object.values(rows[0])[0])
			return;
		if (Date.now() > deadline)
			throw new Error(`timed out after ${seconds} s waiting for ${what}`);
		await sleep(100);
	}
}

// graphileMigrate: install graphile-worker's schema and empty its queue.
async function graphileMigrate(pool) {
	const { runMigrations } = require('graphile-worker');
	await runMigrations({ connectionString: DSN, logger: quietLogger() });
	await pool.query('DELETE FROM graphile_worker._private_jobs');
}

// graphileRunner: a runner for task `task` with the given worker options.
async function graphileRunner(task, options) {
	const { run } = require('graphile-worker');
	return run({
		taskList: {
			[task]: async (payload, helpers) => {
				await helpers.query(`SELECT ${task}($1)`, [payload.id]);
			},
		},
		noHandleSignals: true,
		logger: quietLogger(),
		preset: { worker: { connectionString: DSN, ...options } },
	});
}

// graphile-drain: graphile-worker in its fastest documented configuration:
// a local queue (jobs fetched in batches) and batched completion, working
// the n jobs bench/run has enqueued.
async function graphileDrain(pool, n, concurrency) {
	const runner = await graphileRunner('work', {
		concurrentJobs: concurrency,
		maxPoolSize: concurrency + 2,
		localQueue: { size: 500 },
		completeJobBatchDelay: 0,
		failJobBatchDelay: 0,
	});
	await waitFor(pool, `SELECT count(*) = ${n} FROM results`, 600, 'results');
	await waitFor(pool, 'SELECT count(*) = 0 FROM graphile_worker._private_jobs',
				  60, 'graphile-worker to complete its jobs');
	await runner.stop();
}

// pgboss-drain: pg-boss with batched fetches (batchSize jobs per fetch,
// run concurrently on a pool) and several workers.
async function pgbossDrain(pool, n, batchSize, workers) {
	const PgBoss = require('pg-boss');
	const boss = new PgBoss({ connectionString: DSN, max: workers + 2 });
	boss.on('error', (err) => console.error(`pg-boss: ${err.message}`));
	await boss.start();
	await boss.deleteQueue('work').catch(() => {});
	await boss.createQueue('work');
	const chunk = 10000;
	for (let first = 1; first <= n; first += chunk) {
		const jobs = [];
		for (let id = first; id < Math.min(first + chunk, n + 1); id++)
			jobs.push({ name: 'work', data: { id } });
		await boss.insert(jobs);
	}
	const runPool = new Pool({ connectionString: DSN, max: workers * 2 });
	for (let w = 0; w < workers; w++) {
		await boss.work('work', { batchSize, pollingIntervalSeconds: 0.5 },
						async (jobs) => {
							await Promise.all(jobs.map((job) =>
								runPool.query('SELECT work($1)', [job.data.id])));
						});
	}
	await waitFor(pool, `SELECT count(*) = ${n} FROM results`, 1200, 'results');
	await boss.stop({ graceful: true, wait: true, timeout: 30000 });
	await runPool.end();
}

// latency: one call at a time into an idle system.  Each is scheduled in
// its own transaction, which also records clock_timestamp() just before
// COMMIT; the next is scheduled once the previous has started and a
// little quiet time has passed.
async function latency(pool, system, samples) {
	let runner = null;
	if (system === 'graphile') {
		await graphileMigrate(pool);
		// the default configuration: no local queue, woken by LISTEN/NOTIFY
		runner = await graphileRunner('work_lat', { concurrentJobs: 1 });
	}
	const schedule = system === 'graphile'
		? `SELECT graphile_worker.add_job('work_lat', json_build_object('id', $1::bigint))`
		: `SELECT retries.call('work_lat(bigint)', jsonb_build_array($1::bigint))`;
	const client = await pool.connect();
	try {
		await client.query('TRUNCATE lat_sched, lat_started');
		await sleep(200);
		for (let id = 1; id <= samples; id++) {
			await client.query('BEGIN');
			await client.query(schedule, [id]);
			await client.query('INSERT INTO lat_sched VALUES ($1, clock_timestamp())', [id]);
			await client.query('COMMIT');
			const deadline = Date.now() + 10000;
			for (;;) {
				await sleep(2);
				const { rows } = await client.query(
					'SELECT 1 FROM lat_started WHERE id = $1', [id]);
				if (rows.length > 0)
					break;
				if (Date.now() > deadline)
					throw new Error(`${system}: call ${id} did not start within 10 s`);
			}
			await sleep(10);
		}
	} finally {
		client.release();
	}
	if (runner) {
		await waitFor(pool, 'SELECT count(*) = 0 FROM graphile_worker._private_jobs',
					  60, 'graphile-worker to complete its jobs');
		await runner.stop();
	}
}

// untilWaiting: poll until backend `pid` sleeps on its latch in
// retries.wait()
async function untilWaiting(client, pid) {
	const deadline = Date.now() + 10000;
	for (;;) {
		const { rows } = await client.query(
			'SELECT wait_event FROM pg_stat_activity WHERE pid = $1', [pid]);
		if (rows.length > 0 && rows[0].wait_event === 'Extension')
			return;
		if (Date.now() > deadline)
			throw new Error(`backend ${pid} never waited`);
		await sleep(1);
	}
}

// wake: SAMPLES waits in one session, each for a call that ends in another
// way.  'cancel': another session cancels the call, with synchronous_commit
// off so that its commit does not wait for the disk, and takes
// clock_timestamp() just before COMMIT, in the same round trip; wake_ms
// gets the waiter's clock_timestamp() when retries.wait() returned, less
// that.  'worker': the call is due 50 ms later and a worker runs it
// (work_step records its start in lat_started); wake_ms gets the time from
// the attempt's start to the waiter's return: the end of the batch, its
// commit with the WAL flush, and the wake-up.
async function wake(pool, how, samples) {
	const waiter = await pool.connect();
	const other = await pool.connect();
	try {
		const { rows: [{ pid }] } = await waiter.query('SELECT pg_backend_pid() AS pid');
		await other.query('TRUNCATE wake_ms, lat_started');
		for (let i = 1; i <= samples; i++) {
			const runAt = how === 'cancel' ? "now() + interval '1 hour'" : "now() + interval '50 ms'";
			const { rows: [{ id }] } = await other.query(
				`SELECT retries.call('work_step(bigint)', jsonb_build_array($1::bigint),
									 run_at => ${runAt}) AS id`, [i]);
			const woke = waiter.query(
				"SELECT clock_timestamp()::text AS t, state FROM retries.wait($1, '30s')", [id]);
			if (how === 'cancel') {
				await untilWaiting(other, pid);
				const res = await other.query(
					`SET synchronous_commit = off; BEGIN; SELECT retries.cancel(${Number(id)});
					 SELECT clock_timestamp()::text AS t; COMMIT; RESET synchronous_commit`);
				const { rows: [w] } = await woke;
				if (w.state !== 'cancelled')
					throw new Error(`wake: call ${id} is ${w.state}`);
				await other.query(
					'INSERT INTO wake_ms SELECT extract(epoch FROM $1::timestamptz - $2::timestamptz) * 1000',
					[w.t, res[3].rows[0].t]);
			} else {
				const { rows: [w] } = await woke;
				if (w.state !== 'succeeded')
					throw new Error(`wake: call ${id} is ${w.state}`);
				await other.query(
					`INSERT INTO wake_ms SELECT extract(epoch FROM $1::timestamptz - t) * 1000
					   FROM lat_started WHERE id = $2`, [w.t, i]);
			}
		}
	} finally {
		waiter.release();
		other.release();
	}
}

async function main() {
	const [mode, ...args] = process.argv.slice(2);
	const num = (i) => {
		const v = Number(args[i]);
		if (!Number.isInteger(v) || v < 1)
			throw new Error(`${mode}: argument ${i + 1} must be a positive integer`);
		return v;
	};
	const pool = new Pool({ connectionString: DSN, max: 2 });
	try {
		switch (mode) {
		case 'graphile-drain':
			await graphileDrain(pool, num(0), num(1));
			break;
		case 'pgboss-drain':
			await pgbossDrain(pool, num(0), num(1), num(2));
			break;
		case 'latency':
			if (args[0] !== 'retries' && args[0] !== 'graphile')
				throw new Error('latency: the system is retries or graphile');
			await latency(pool, args[0], Number(args[1]));
			break;
		case 'wake':
			if (args[0] !== 'cancel' && args[0] !== 'worker')
				throw new Error('wake: the end is cancel or worker');
			await wake(pool, args[0], num(1));
			break;
		case 'graphile-migrate':
			await graphileMigrate(pool);
			break;
		default:
			throw new Error(`unknown mode "${mode}"`);
		}
	} finally {
		await pool.end();
	}
}

main().catch((err) => {
	console.error(`peers.js: ${err.stack || err.message}`);
	process.exit(1);
});
