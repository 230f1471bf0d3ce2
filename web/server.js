#!/usr/bin/env node
// web/server.js: the retries dashboard.  Reads and acts through the
// extension's SQL API, as the PostgreSQL role of the person logged in
// (lib/sessions.js); every page is HTML made on the server (lib/pages.js),
// every text in it escaped (lib/html.js); one small script (static/app.js)
// keeps the calls shown live over server-sent events.
//
//   node web/server.js [--host 127.0.0.1] [--port 8080] [--read-only]
//                      [--allow-trust]
//
// PostgreSQL is the one libpq's environment names: PGHOST, PGPORT,
// PGDATABASE (the default database of the login form).  See web/README.md.

'use strict';

const http = require('http');
const fs = require('fs');
const path = require('path');
const { URL } = require('url');
const querystring = require('querystring');

const sessions = require('./lib/sessions');
const pages = require('./lib/pages');
const { h } = require('./lib/html');

const MAX_BODY = 64 * 1024;
const LIVE_MS = 1000;
const MAX_LIVE_IDS = 200;

function parseArgs(argv) {
	const o = {
		host: '127.0.0.1',
		port: 8080,
		readOnly: false,
		allowTrust: false,
		pghost: process.env.PGHOST || '/var/run/postgresql',
		pgport: Number(process.env.PGPORT || 5432),
		database: process.env.PGDATABASE || 'postgres',
		statementTimeout: 10000,
	};
	for (let i = 2; i < argv.length; i++) {
		const a = argv[i];
		if (a === '--host')
			o.host = argv[++i];
		else if (a === '--port')
			o.port = Number(argv[++i]);
		else if (a === '--read-only')
			o.readOnly = true;
		else if (a === '--allow-trust')
			o.allowTrust = true;
		else if (a === '--help') {
			process.stdout.write('usage: server.js [--host ADDR] [--port N] [--read-only] [--allow-trust]\n');
			process.exit(0);
		} else
			throw new Error('unknown option ' + a);
	}
	if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535)
		throw new Error('--port must be a port number');
	return o;
}

const STATIC = {
	'/static/app.js': ['text/javascript; charset=utf-8', fs.readFileSync(path.join(__dirname, 'static/app.js'))],
	'/static/style.css': ['text/css; charset=utf-8', fs.readFileSync(path.join(__dirname, 'static/style.css'))],
};

// headers of every response: nothing but our own files may run or load
function secure(res) {
	res.setHeader('Content-Security-Policy',
		"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
	res.setHeader('X-Content-Type-Options', 'nosniff');
	res.setHeader('X-Frame-Options', 'DENY');
	res.setHeader('Referrer-Policy', 'same-origin');
	res.setHeader('Cache-Control', 'no-store');
}

function send(res, status, body, type = 'text/html; charset=utf-8') {
	res.statusCode = status;
	res.setHeader('Content-Type', type);
	res.end(String(body));
}

function redirect(res, to) {
	res.statusCode = 303;
	res.setHeader('Location', to);
	res.end();
}

function cookies(req) {
	const out = {};
	for (const part of (req.headers.cookie || '').split(';')) {
		const i = part.indexOf('=');
		if (i > 0)
			out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
	}
	return out;
}

function readBody(req) {
	return new Promise((resolve, reject) => {
		let size = 0;
		const chunks = [];
		req.on('data', (c) => {
			size += c.length;
			if (size > MAX_BODY) {
				reject(Object.assign(new Error('body too large'), { status: 413 }));
				req.destroy();
				return;
			}
			chunks.push(c);
		});
		req.on('end', () => resolve(querystring.parse(Buffer.concat(chunks).toString('utf8'))));
		req.on('error', reject);
	});
}

// a POST must come from a page of this server: its Origin (or, without
// one, its Sec-Fetch-Site) says so; a cross-site form or fetch is refused
// before anything else, the session's CSRF token checked after
function sameOrigin(req) {
	const origin = req.headers.origin;
	if (origin !== undefined)
		return origin === 'http://' + req.headers.host || origin === 'https://' + req.headers.host;
	const site = req.headers['sec-fetch-site'];
	return site === undefined || site === 'same-origin' || site === 'none';
}

function one(v) {
	return Array.isArray(v) ? v[0] : v;
}

function makeServer(options) {
	let secureCookie = false;

	async function handle(req, res) {
		secure(res);
		const url = new URL(req.url, 'http://localhost');
		const p = url.pathname;
		const q = Object.fromEntries(url.searchParams);
		const s = sessions.get(cookies(req).retries_sid);

		if (req.method === 'GET' && STATIC[p]) {
			res.setHeader('Cache-Control', 'max-age=300');
			return send(res, 200, STATIC[p][1], STATIC[p][0]);
		}
		if (req.method === 'POST') {
			if (!sameOrigin(req))
				return send(res, 403, 'cross-site request refused', 'text/plain; charset=utf-8');
			const body = await readBody(req);
			if (p === '/login')
				return doLogin(req, res, body);
			if (!s || !sessions.sameToken(one(body.csrf), s.csrf))
				return send(res, 403, 'missing or wrong CSRF token, or no session', 'text/plain; charset=utf-8');
			if (p === '/logout') {
				sessions.end(s);
				res.setHeader('Set-Cookie', cookie('', 0));
				return redirect(res, '/login');
			}
			if (p.startsWith('/act/'))
				return act(res, s, p.slice(5), body);
			return send(res, 404, 'not found', 'text/plain; charset=utf-8');
		}
		if (req.method !== 'GET')
			return send(res, 405, 'method not allowed', 'text/plain; charset=utf-8');
		if (p === '/login')
			return send(res, 200, pages.loginPage(null, options.database));
		if (!s)
			return redirect(res, '/login');
		if (p === '/live')
			return live(req, res, s, q);
		try {
			const f = flash(q);
			let page;
			if (p === '/')
				page = await pages.overview(s, f);
			else if (p === '/calls')
				page = await pages.calls(s, q, f);
			else if (/^\/calls\/\d{1,19}$/.test(p))
				page = await pages.call(s, p.slice(7), f);
			else if (p === '/schedules')
				page = await pages.schedules(s, f);
			else if (p === '/flow')
				page = await pages.flow(s, f);
			else if (p === '/workers')
				page = await pages.workers(s, f);
			else if (p === '/events')
				page = await pages.events(s, f);
			if (!page)
				return send(res, 404, pages.layout(s, 'Not found', h`<h1>Not found</h1><p>No such page, or nothing of yours there.</p>`));
			return send(res, 200, page);
		} catch (e) {
			if (!e.code)
				throw e;
			return send(res, 400, pages.layout(s, 'Error', h`<h1>The query failed</h1>${pages.pgError(e)}`));
		}
	}

	function cookie(value, maxAge) {
		return `retries_sid=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}` +
			(secureCookie ? '; Secure' : '');
	}

	function flash(q) {
		if (q.done)
			return { kind: 'ok', text: String(q.done).slice(0, 200) };
		return null;
	}

	async function doLogin(req, res, body) {
		const role = String(one(body.role) || '').slice(0, 63);
		const password = String(one(body.password) || '');
		const ip = req.socket.remoteAddress || '';
		if (!role)
			return send(res, 400, pages.loginPage('A role is needed.', options.database));
		if (!sessions.loginAllowed(ip, role))
			return send(res, 429, pages.loginPage('Too many failed logins: wait a minute.', options.database));
		let s;
		try {
			s = await sessions.login(options, role, password, options.readOnly || one(body.read_only) === '1');
		} catch (e) {
			sessions.noteFailure(ip, role);
			return send(res, 401, pages.loginPage(e.userMessage || 'Login failed: ' + e.message, options.database));
		}
		secureCookie = req.headers['x-forwarded-proto'] === 'https';
		res.setHeader('Set-Cookie', cookie(s.id, 12 * 3600));
		return redirect(res, '/');
	}

	async function act(res, s, name, body) {
		const a = pages.ACTIONS[name];
		if (!a)
			return send(res, 404, 'no such action', 'text/plain; charset=utf-8');
		if (s.readOnly)
			return send(res, 403, pages.layout(s, 'Read-only', h`<h1>Read-only</h1><p>This session only looks.</p>`));
		const args = a.args.map((k) => {
			const v = one(body[k]);
			return v === undefined || v === '' ? null : String(v);
		});
		try {
			const r = await s.client.query(a.sql, args);
			const value = Object.values(r.rows[0])[0];
			const back = a.back(body);
			return redirect(res, back + '?done=' + encodeURIComponent(`${name}: ${value}`));
		} catch (e) {
			if (!e.code)
				throw e;
			return send(res, 400, pages.layout(s, 'Error', h`<h1>${name} failed</h1>${pages.pgError(e)}
<p><a href="/">Back to the overview</a></p>`));
		}
	}

	// server-sent events: the state of the calls a page shows, every
	// LIVE_MS, sent when it changed
	function live(req, res, s, q) {
		const ids = String(q.calls || '').split(',').filter((x) => /^\d{1,19}$/.test(x)).slice(0, MAX_LIVE_IDS);
		res.writeHead(200, {
			'Content-Type': 'text/event-stream; charset=utf-8',
			'Cache-Control': 'no-store',
			Connection: 'keep-alive',
		});
		res.write('retry: 2000\n\n');
		const seen = new Map();
		let busy = false;
		const tick = async () => {
			if (busy || ids.length === 0)
				return;
			busy = true;
			try {
				const rows = await pages.liveCalls(s, ids);
				const changed = rows.filter((r) => {
					const sig = `${r.state}|${r.attempts}|${r.updated_at && r.updated_at.getTime()}`;
					const was = seen.get(r.id);
					seen.set(r.id, sig);
					return was !== undefined && was !== sig;
				});
				if (changed.length)
					res.write('data: ' + JSON.stringify(changed) + '\n\n');
				else
					res.write(': tick\n\n');
			} catch (e) {
				stop();
			} finally {
				busy = false;
			}
		};
		const timer = setInterval(tick, LIVE_MS);
		const stop = () => {
			clearInterval(timer);
			s.streams.delete(stop);
			res.end();
		};
		s.streams.add(stop);
		req.on('close', stop);
		tick();
	}

	const server = http.createServer((req, res) => {
		handle(req, res).catch((e) => {
			if (e.status === 413)
				return send(res, 413, 'too large', 'text/plain; charset=utf-8');
			process.stderr.write(`retries web: ${e.stack || e}\n`);
			if (!res.headersSent)
				send(res, 500, 'internal error', 'text/plain; charset=utf-8');
			else
				res.end();
		});
	});
	server.requestTimeout = 30000;
	server.headersTimeout = 10000;
	return server;
}

if (require.main === module) {
	let options;
	try {
		options = parseArgs(process.argv);
	} catch (e) {
		process.stderr.write(`retries web: ${e.message}\n`);
		process.exit(2);
	}
	const server = makeServer(options);
	const sweeper = setInterval(() => sessions.sweep(), 60000);
	server.listen(options.port, options.host, () => {
		const a = server.address();
		process.stdout.write(`retries web: http://${a.address}:${a.port}/ (PostgreSQL ${options.pghost}:${options.pgport}, database ${options.database})\n`);
	});
	const quit = () => {
		clearInterval(sweeper);
		sessions.endAll();
		server.close(() => process.exit(0));
		setTimeout(() => process.exit(0), 2000).unref();
	};
	process.on('SIGTERM', quit);
	process.on('SIGINT', quit);
}

module.exports = { makeServer, parseArgs };
