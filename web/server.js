#!/usr/bin/env node
// web/server.js: the retries dashboard.  Reads and acts through the
// extension's SQL API, as the PostgreSQL role of the person logged in
// (lib/sessions.js); every page is HTML made on the server (lib/pages.js),
// every text in it escaped (lib/html.js); one small script (static/app.js)
// keeps the calls shown live over server-sent events.
//
//   node web/server.js [--host 127.0.0.1] [--port 8080] [--read-only]
//                      [--allow-trust] [--public-host NAME[:PORT]]...
//                      [--trust-proxy]
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
const COOKIE = 'retries_sid';
const ROLE_NAME = /^[^\x00-\x1f\x7f]{1,63}$/;
const LIVE_MS = 1000;
const MAX_LIVE_IDS = 200;

function parseArgs(argv) {
	const o = {
		host: '127.0.0.1',
		port: 8080,
		readOnly: false,
		allowTrust: false,
		publicHosts: [],
		trustProxy: false,
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
		else if (a === '--public-host')
			o.publicHosts.push(String(argv[++i] || '').toLowerCase());
		else if (a === '--trust-proxy')
			o.trustProxy = true;
		else if (a === '--help') {
			process.stdout.write('usage: server.js [--host ADDR] [--port N] [--read-only] [--allow-trust] [--public-host NAME[:PORT]]... [--trust-proxy]\n');
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

// the session cookie's value; undefined if none, or if the request has
// more than one (another origin of the same host name, on another port,
// may set cookies of that name: two are refused, not guessed between)
function sessionCookie(req) {
	let value;
	let count = 0;
	for (const part of (req.headers.cookie || '').split(';')) {
		const i = part.indexOf('=');
		if (i > 0 && part.slice(0, i).trim() === COOKIE) {
			value = part.slice(i + 1).trim();
			count++;
		}
	}
	return count === 1 ? value : undefined;
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
// before anything else, the session's CSRF token checked after.  The Host
// was checked already (allowedHost), so the request's own origin is one of
// the dashboard's.
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

function makeServer(given) {
	const options = { publicHosts: [], trustProxy: false, readOnly: false, allowTrust: false, ...given };
	// the names the dashboard answers to: its own address and loopback's,
	// at its port, and those given with --public-host; any other Host (a
	// name an attacker's DNS pointed at this address: DNS rebinding) is
	// refused before anything else
	function allowedHost(req) {
		const host = String(req.headers.host || '').toLowerCase();
		const port = server.address().port;
		const own = [options.host, '127.0.0.1', 'localhost', '[::1]'].map((n) => `${n}:${port}`);
		return own.includes(host) || options.publicHosts.includes(host);
	}

	// who is asking: the connection's address, or, behind a proxy the
	// dashboard trusts (--trust-proxy), the address the proxy gives last
	function clientOf(req) {
		const forwarded = String(req.headers['x-forwarded-for'] || '').split(',').map((x) => x.trim()).filter(Boolean);
		if (options.trustProxy && forwarded.length)
			return forwarded[forwarded.length - 1];
		return req.socket.remoteAddress || '';
	}

	function overTls(req) {
		return options.trustProxy && req.headers['x-forwarded-proto'] === 'https';
	}

	async function handle(req, res) {
		secure(res);
		if (!allowedHost(req))
			return send(res, 421, 'this dashboard does not answer to that host name (see --public-host)', 'text/plain; charset=utf-8');
		const url = new URL(req.url, 'http://localhost');
		const p = url.pathname;
		const q = Object.fromEntries(url.searchParams);
		const s = sessions.get(sessionCookie(req));

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
				res.setHeader('Set-Cookie', cookie(req, '', 0));
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
			const f = s.flash;
			let page;
			s.flash = null;
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

	function cookie(req, value, maxAge) {
		return `${COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}` +
			(overTls(req) ? '; Secure' : '');
	}

	async function doLogin(req, res, body) {
		const role = String(one(body.role) || '');
		const password = String(one(body.password) || '');
		const client = clientOf(req);
		if (!ROLE_NAME.test(role))
			return send(res, 400, pages.loginPage('A role name is needed: 1 to 63 characters, none of them a control character.', options.database));
		const refused = sessions.loginBegin(client, role);
		if (refused)
			return send(res, 429, pages.loginPage(refused, options.database));
		let s;
		try {
			s = await sessions.login(options, role, password, options.readOnly || one(body.read_only) === '1');
		} catch (e) {
			sessions.loginDone(client, role, false);
			// one message for every failure: which one it was (a wrong
			// password, a role that may not log in) would tell a guesser
			// that a password was right
			if (!e.userMessage)
				process.stderr.write(`retries web: login of role ${JSON.stringify(role)} failed: ${e.message}\n`);
			return send(res, 401, pages.loginPage(e.userMessage || 'Login failed.', options.database));
		}
		sessions.loginDone(client, role, true);
		res.setHeader('Set-Cookie', cookie(req, s.id, 12 * 3600));
		return redirect(res, '/');
	}

	async function act(res, s, name, body) {
		const a = Object.hasOwn(pages.ACTIONS, name) ? pages.ACTIONS[name] : null;
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
			s.flash = { kind: 'ok', text: `${name}: ${value}` };
			return redirect(res, a.back(body));
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
		// what the page showed: id -> 'state|attempts'
		const seen = new Map();
		for (const k of String(q.known || '').split(',').slice(0, MAX_LIVE_IDS)) {
			const m = /^(\d{1,19}):([a-z]{1,20}):(\d{1,10})$/.exec(k);
			if (m)
				seen.set(m[1], `${m[2]}|${m[3]}`);
		}
		// one look at a time for the whole session, whose one connection
		// queues its queries: streams opened in a tight loop, each looking
		// at once, queued tens of thousands of them, and the server grew by
		// hundreds of megabytes (web/test/soak.js).  A stream whose turn
		// comes while another of the session looks waits for that look,
		// once (s.livePending, a set: at most one entry a stream open), not
		// for its next turn; an ended stream leaves the set.
		let stopped = false;
		const tick = async () => {
			if (stopped || ids.length === 0)
				return;
			if (s.liveBusy) {
				s.livePending.add(tick);
				return;
			}
			s.liveBusy = true;
			try {
				const rows = await pages.liveCalls(s, ids);
				// ended while it looked: a write after the end was an
				// 'error' event that nothing handled, and ended the server
				// (web/test/soak.js, after 8 minutes)
				if (stopped)
					return;
				const changed = rows.filter((r) => {
					const sig = `${r.state}|${r.attempts}`;
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
				s.liveBusy = false;
				const next = s.livePending.values().next().value;
				if (next !== undefined) {
					s.livePending.delete(next);
					next();
				}
			}
		};
		const timer = setInterval(tick, LIVE_MS);
		const stop = () => {
			if (stopped)
				return;
			stopped = true;
			clearInterval(timer);
			s.livePending.delete(tick);
			s.streams.delete(stop);
			res.end();
		};
		s.lastSeen = Date.now();
		sessions.addStream(s, stop);
		req.on('close', stop);
		res.on('error', stop);
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
