#!/usr/bin/env node
// web/test/soak.js: does the dashboard's memory stay flat under live
// updates?  scripts/web --soak runs it against a private cluster it starts
// (PGHOST, PGPORT, PGDATABASE; the superuser RETRIES_WEB_SUPERUSER).
//
// It starts the server (node web/server.js, a process of its own), logs
// in as alice in four sessions, and for RETRIES_WEB_SOAK_MINUTES (45)
// keeps RETRIES_WEB_SOAK_STREAMS (32) live streams open, each following
// the 50 newest calls and opened again every 30 s with the newest, while
// alice makes 20 calls a second (one in ten fails and is retried) and each
// session loads the overview and the calls page every 5 s.  A page left
// open a day receives 86,400 ticks of its stream: 16 streams for 45
// minutes are half that, with 1,400 streams opened and closed, and as
// many lists of calls changing under them.  Every 30 s it prints the server's resident
// memory (VmRSS) and what the streams received; at the end the first,
// the largest and the last figures.  Nothing is asserted: the figures go
// to web/README.md ("Memory over time").

'use strict';

const { Client } = require('pg');
const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const path = require('path');
const { aliceSetup } = require('./alice');

const MINUTES = Number(process.env.RETRIES_WEB_SOAK_MINUTES || 45);
const STREAMS = Number(process.env.RETRIES_WEB_SOAK_STREAMS || 16);
const SESSIONS = 4;
let PORT = 0;	/* the server's, as it prints it */
const STREAM_MS = 30000;
const SAMPLE_MS = 30000;

const SETUP = aliceSetup({ failEvery: 10, policy: '2 100ms' });

// request(method, path, cookie, body): status, headers and body of one
// request to the server
function request(method, p, cookie, body) {
	return new Promise((resolve, reject) => {
		const headers = { Host: `127.0.0.1:${PORT}`, Origin: `http://127.0.0.1:${PORT}` };
		if (cookie)
			headers.Cookie = cookie;
		if (body) {
			headers['Content-Type'] = 'application/x-www-form-urlencoded';
			headers['Content-Length'] = Buffer.byteLength(body);
		}
		const req = http.request({ host: '127.0.0.1', port: PORT, method, path: p, headers }, (res) => {
			let data = '';
			res.on('data', (c) => { data += c; });
			res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
		});
		req.on('error', reject);
		if (body)
			req.write(body);
		req.end();
	});
}

async function login() {
	const r = await request('POST', '/login', null, 'role=alice&password=alice-pw');
	const set = [].concat(r.headers['set-cookie'] || [])[0];
	if (r.status !== 303 || !set)
		throw new Error(`login failed: ${r.status} ${r.body.slice(0, 200)}`);
	return set.split(';')[0];
}

// stream(cookie, ids, counts): one live stream for STREAM_MS, counting
// the ticks and updates it receives
function stream(cookie, ids, counts) {
	return new Promise((resolve) => {
		const req = http.request({
			host: '127.0.0.1', port: PORT, path: `/live?calls=${ids.join(',')}`,
			headers: { Host: `127.0.0.1:${PORT}`, Cookie: cookie },
		}, (res) => {
			res.setEncoding('utf8');
			res.on('data', (c) => {
				counts.ticks += (c.match(/^: tick$/gm) || []).length;
				counts.updates += (c.match(/^data: /gm) || []).length;
			});
			res.on('end', resolve);
			res.on('error', resolve);
		});
		req.on('error', resolve);
		req.end();
		counts.opened++;
		setTimeout(() => { req.destroy(); resolve(); }, STREAM_MS);
	});
}

function rssKb(pid) {
	const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
	return m ? Number(m[1]) : NaN;
}

async function main() {
	const admin = new Client({ user: process.env.RETRIES_WEB_SUPERUSER || 'postgres' });
	await admin.connect();
	await admin.query(SETUP);

	const server = spawn(process.execPath, [path.join(__dirname, '..', 'server.js'), '--port', '0'],
		{ stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
	process.on('exit', () => server.kill('SIGKILL'));
	const banner = await new Promise((resolve) => server.stdout.once('data', resolve));
	PORT = Number(/:(\d+)\//.exec(String(banner))[1]);
	const cookies = [];
	for (let i = 0; i < SESSIONS; i++)
		cookies.push(await login());

	const until = Date.now() + MINUTES * 60000;
	const counts = { ticks: 0, updates: 0, opened: 0, pages: 0, calls: 0 };
	let ids = [];
	let running = true;

	// alice's calls, 20 a second, and the 50 newest of them
	await admin.query('SET ROLE alice');
	const maker = (async () => {
		let n = 0;
		while (running) {
			const r = await admin.query(`SELECT retries.call('alice.work(int)', jsonb_build_array(g)) AS id
  FROM generate_series($1::int, $1::int + 19) g`, [n]);
			const made = r.rows.map((x) => x.id);
			n += 20;
			counts.calls += made.length;
			ids = ids.concat(made).slice(-50);
			await new Promise((resolve) => setTimeout(resolve, 1000));
		}
	})();
	// the streams, each opened again with the newest calls
	const streamers = Array.from({ length: STREAMS }, async (_, i) => {
		await new Promise((resolve) => setTimeout(resolve, (i * STREAM_MS) / STREAMS));
		while (running)
			await stream(cookies[i % SESSIONS], ids.length ? ids : ['1'], counts);
	});
	// the pages, every 5 s in each session
	const pagers = cookies.map(async (cookie) => {
		while (running) {
			for (const p of ['/', '/calls'])
				if ((await request('GET', p, cookie)).status === 200)
					counts.pages++;
			await new Promise((resolve) => setTimeout(resolve, 5000));
		}
	});

	const samples = [];
	const t0 = Date.now();
	console.log('# minute  rss_kb  streams_opened  ticks  updates  pages  calls');
	while (Date.now() < until) {
		await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
		const kb = rssKb(server.pid);
		samples.push(kb);
		console.log(`${((Date.now() - t0) / 60000).toFixed(1)} ${kb} ${counts.opened} ${counts.ticks} ${counts.updates} ${counts.pages} ${counts.calls}`);
	}
	running = false;
	server.kill('SIGTERM');
	await Promise.allSettled([maker, ...pagers]);
	await Promise.race([Promise.allSettled(streamers), new Promise((resolve) => setTimeout(resolve, STREAM_MS + 5000))]);
	await admin.end();
	const first = samples[Math.min(1, samples.length - 1)];
	console.log(`# rss: at 1 min ${first} kB, largest ${Math.max(...samples)} kB, last ${samples[samples.length - 1]} kB; ` +
		`${counts.opened} streams, ${counts.ticks} ticks, ${counts.updates} updates, ${counts.pages} pages, ${counts.calls} calls in ${MINUTES} min`);
	process.exit(0);
}

main().catch((e) => {
	console.error(e);
	process.exit(1);
});
