// web/lib/sessions.js: who is logged in, as which PostgreSQL role.
//
// A login opens one connection to PostgreSQL as the role, with the
// password typed; the server checks it, and the password is then
// forgotten: the session keeps the open connection, never the password.
// Every page and action of the session runs on that connection, so a
// person sees and does exactly what the role may in SQL.  A login the
// server did not ask a password for (pg_hba.conf's trust, peer) is
// refused unless the dashboard was started with --allow-trust (a local
// demo): otherwise anyone could be any role.
//
// A session's id is 32 random bytes, made at login (never taken from the
// browser before it: no fixation), in an HttpOnly, SameSite=Strict
// cookie; its CSRF token is 32 more, required in every form that acts.
// Sessions end at logout, after IDLE_MS without a request (an open live
// stream counts as one), MAX_AGE_MS after login, or when their connection
// breaks.  At most MAX_SESSIONS at once, MAX_PER_ROLE of one role (its own
// oldest ends for a new one): one role's logins never end another's; when
// all are taken a login is refused.
//
// Logins: at most IN_FLIGHT connect at once, one per client, so that a
// flood of logins cannot take PostgreSQL's connections; LOGIN_FAILURES
// failed ones in LOGIN_WINDOW_MS per client, and per client and role, each
// counted as it starts (parallel attempts cannot pass the count).  No
// count is per role alone: nobody can lock a role out for everyone.

'use strict';

const crypto = require('crypto');
const { Client } = require('pg');

const IDLE_MS = 30 * 60 * 1000;
const MAX_AGE_MS = 12 * 3600 * 1000;
const MAX_SESSIONS = 64;
const MAX_PER_ROLE = 8;
const MAX_STREAMS = 4;
const IN_FLIGHT = 8;
const LOGIN_FAILURES = 5;
const LOGIN_WINDOW_MS = 60 * 1000;

const sessions = new Map();		// id -> session
const failures = new Map();		// 'c:CLIENT' or 'r:CLIENT:ROLE' -> [times]
const inFlight = new Set();		// clients with a login connecting

function token() {
	return crypto.randomBytes(32).toString('base64url');
}

// equal strings, in time that does not depend on where they differ
function sameToken(a, b) {
	if (typeof a !== 'string' || typeof b !== 'string')
		return false;
	const x = Buffer.from(a);
	const y = Buffer.from(b);
	return x.length === y.length && crypto.timingSafeEqual(x, y);
}

function recentFailures(key, now) {
	const list = (failures.get(key) || []).filter((t) => now - t < LOGIN_WINDOW_MS);
	if (list.length)
		failures.set(key, list);
	else
		failures.delete(key);
	return list;
}

// start a login attempt of 'client' as 'role': null if it may go on (then
// loginDone() must follow), else why not.  The attempt counts as a failure
// from now on; a login that succeeds takes it back.
function loginBegin(client, role, now = Date.now()) {
	if (inFlight.has(client) || inFlight.size >= IN_FLIGHT)
		return 'Too many logins at once: try again in a moment.';
	const keys = ['c:' + client, 'r:' + client + ':' + role];
	if (keys.some((k) => recentFailures(k, now).length >= LOGIN_FAILURES))
		return 'Too many failed logins: wait a minute.';
	for (const k of keys)
		failures.set(k, [...recentFailures(k, now), now]);
	// bounded: the oldest keys go first
	while (failures.size > 10000)
		failures.delete(failures.keys().next().value);
	inFlight.add(client);
	return null;
}

function loginDone(client, role, ok, now = Date.now()) {
	inFlight.delete(client);
	if (!ok)
		return;
	for (const k of ['c:' + client, 'r:' + client + ':' + role]) {
		const list = recentFailures(k, now);
		list.pop();
		if (list.length)
			failures.set(k, list);
		else
			failures.delete(k);
	}
}

// log in: a session, or an Error whose .userMessage is for the page
async function login(options, role, password, readOnly) {
	let asked = false;
	const client = new Client({
		host: options.pghost,
		port: options.pgport,
		database: options.database,
		user: role,
		password: async () => {
			asked = true;
			return password;
		},
		application_name: 'retries web',
		connectionTimeoutMillis: 10000,
		statement_timeout: options.statementTimeout,
	});
	client.on('error', () => {});	/* a broken connection ends the session */
	await client.connect();
	if (!asked && !options.allowTrust) {
		await client.end().catch(() => {});
		const e = new Error('the server did not check a password');
		e.userMessage = 'The server let this role in without checking a password (pg_hba.conf trust or peer): the dashboard refuses such logins unless started with --allow-trust.';
		throw e;
	}
	// names of functions shown whole (schema.name), whatever the role's path
	await client.query('SET search_path = pg_catalog');
	if (readOnly)
		await client.query('SET default_transaction_read_only = on');
	const mine = [...sessions.values()].filter((x) => x.role === role);
	if (mine.length >= MAX_PER_ROLE)
		end(mine.reduce((a, b) => (a.lastSeen <= b.lastSeen ? a : b)));
	else if (sessions.size >= MAX_SESSIONS) {
		await client.end().catch(() => {});
		const e = new Error('too many sessions');
		e.userMessage = 'Too many sessions are open: try again later.';
		throw e;
	}
	const s = {
		id: token(),
		csrf: token(),
		role,
		readOnly: !!readOnly,
		client,
		createdAt: Date.now(),
		lastSeen: Date.now(),
		streams: new Set(),
		liveBusy: false,		// a live stream's look is under way (server.js)
		livePending: new Set(),	// ... and the streams whose turn came meanwhile
		flash: null,
	};
	client.on('end', () => end(s));
	sessions.set(s.id, s);
	return s;
}

function get(id, now = Date.now()) {
	if (typeof id !== 'string')
		return null;
	const s = sessions.get(id);
	if (!s)
		return null;
	if (expired(s, now)) {
		end(s);
		return null;
	}
	s.lastSeen = now;
	return s;
}

function expired(s, now) {
	return now - s.createdAt > MAX_AGE_MS || (now - s.lastSeen > IDLE_MS && s.streams.size === 0);
}

// a live stream of the session: its stop function kept, the oldest
// stopped beyond MAX_STREAMS
function addStream(s, stop) {
	s.streams.add(stop);
	while (s.streams.size > MAX_STREAMS) {
		const oldest = s.streams.values().next().value;
		oldest();
	}
}

function end(s) {
	if (!sessions.has(s.id))
		return;
	sessions.delete(s.id);
	for (const stop of s.streams)
		stop();
	s.streams.clear();
	s.client.end().catch(() => {});
}

function sweep(now = Date.now()) {
	for (const s of [...sessions.values()])
		if (expired(s, now))
			end(s);
}

function endAll() {
	for (const s of [...sessions.values()])
		end(s);
}

module.exports = {
	login, get, end, sweep, endAll, loginBegin, loginDone, addStream, sameToken, token,
	count: () => sessions.size,
};
