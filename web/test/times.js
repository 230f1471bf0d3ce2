#!/usr/bin/env node
// web/test/times.js: how long each page of the dashboard takes to query
// with many calls (a million by default), as their role sees them.
// scripts/web --times runs it against a private cluster it starts (PGHOST,
// PGPORT, PGDATABASE; the superuser RETRIES_WEB_SUPERUSER).
//
// alice makes RETRIES_WEB_CALLS calls of two functions: most succeed, one
// in twenty fails for good with RT503 after two attempts, one in ten is
// due in a day (scheduled), and every tenth has a key.  Once the workers
// have drained them, each page's queries run as alice, through the page's
// own code (lib/pages.js, with a session as a login gives it), five
// times: the median and the slowest are printed, a line each, and the
// plan of the calls page's query for each filter, so that a page that no
// index serves shows as such.  Nothing is asserted: the figures go to
// web/README.md ("Page times").

'use strict';

const { Client } = require('pg');
const pages = require('../lib/pages');
const { aliceSetup } = require('./alice');

const N = Number(process.env.RETRIES_WEB_CALLS || 1000000);
const ROUNDS = 5;
const BATCH = 50000;

const SETUP = aliceSetup({ failEvery: 20, policy: '2 1ms', other: true });

async function main() {
	const admin = new Client({ user: process.env.RETRIES_WEB_SUPERUSER || 'postgres' });
	await admin.connect();
	await admin.query(SETUP);
	const t0 = Date.now();
	for (let from = 1; from <= N; from += BATCH) {
		const to = Math.min(from + BATCH - 1, N);
		await admin.query(`SET ROLE alice;
SELECT count(retries.call(CASE WHEN g % 7 = 0 THEN 'alice.other(int)' ELSE 'alice.work(int)' END::regprocedure,
                          jsonb_build_array(g),
                          run_at => CASE WHEN g % 10 = 3 THEN now() + interval '1 day' ELSE now() END,
                          key => CASE WHEN g % 10 = 1 THEN 'k' || g END))
  FROM generate_series(${from}, ${to}) g;
RESET ROLE;`);
	}
	console.log(`# ${N} calls made in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
	const due = Math.floor(N / 10) + (N % 10 >= 3 ? 1 : 0);
	for (;;) {
		const r = await admin.query(`SELECT count(*) FILTER (WHERE state IN ('scheduled', 'running')) AS open
  FROM retries.call_data`);
		if (Number(r.rows[0].open) <= due)
			break;
		await new Promise((res) => setTimeout(res, 2000));
	}
	console.log(`# drained in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
	await admin.query('VACUUM ANALYZE retries.call_data');
	await admin.query('VACUUM ANALYZE retries.attempts');
	const counts = await admin.query(`SELECT state::text, count(*) FROM retries.call_data GROUP BY 1 ORDER BY 1`);
	console.log('# ' + counts.rows.map((r) => `${r.state} ${r.count}`).join(', '));
	const mid = (await admin.query('SELECT (min(id) + max(id)) / 2 AS id FROM retries.call_data')).rows[0].id;
	const failed = (await admin.query(`SELECT max(id) AS id FROM retries.call_data WHERE state = 'failed'`)).rows[0].id;
	const since = (await admin.query(`SELECT to_char(now() - interval '1 minute', 'YYYY-MM-DD"T"HH24:MI') AS t`)).rows[0].t;
	await admin.end();

	const client = new Client({ user: 'alice', password: 'alice-pw' });
	await client.connect();
	await client.query('SET search_path = pg_catalog');
	const s = { client, role: 'alice', csrf: 'x', readOnly: false };
	const filters = {
		'none': {},
		'state=failed': { state: 'failed' },
		'state=scheduled': { state: 'scheduled' },
		'fn=alice.other(integer)': { fn: 'alice.other(integer)' },
		'key=k11': { key: 'k11' },
		'sqlstate=RT503': { sqlstate: 'RT503' },
		'since (a minute ago)': { since },
		'before (the middle id)': { before: String(mid) },
		'state=failed, before the middle': { state: 'failed', before: String(mid) },
	};
	const measured = [
		['overview', () => pages.overview(s)],
		...Object.entries(filters).map(([name, q]) => [`calls, ${name}`, () => pages.calls(s, q)]),
		['a call (failed, 2 attempts)', () => pages.call(s, failed)],
		['live update of 50 calls', () => pages.liveCalls(s, Array.from({ length: 50 }, (_, i) => String(Number(mid) + i)))],
		['schedules', () => pages.schedules(s)],
		['flow control', () => pages.flow(s)],
		['workers', () => pages.workers(s)],
		['events', () => pages.events(s)],
	];
	console.log(`page | median ms | slowest ms (${ROUNDS} runs, ${N} calls)`);
	for (const [name, fn] of measured) {
		const ms = [];
		for (let i = 0; i < ROUNDS; i++) {
			const t = process.hrtime.bigint();
			await fn();
			ms.push(Number(process.hrtime.bigint() - t) / 1e6);
		}
		ms.sort((a, b) => a - b);
		console.log(`${name} | ${ms[Math.floor(ROUNDS / 2)].toFixed(1)} | ${ms[ROUNDS - 1].toFixed(1)}`);
	}
	for (const [name, q] of Object.entries(filters)) {
		const { where, params } = pages.callFilters(q);
		const plan = await client.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON)
SELECT id FROM retries.recent_calls ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
 LIMIT 51`, params);
		console.log(`# plan, calls ${name}:`);
		for (const r of plan.rows)
			console.log('#   ' + r['QUERY PLAN']);
	}
	await client.end();
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
