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
// Sessions end at logout, after IDLE_MS without a request, or when their
// connection breaks; at most MAX_SESSIONS at once.  Failed logins are
// limited per client address and per role name (LOGIN_FAILURES in
// LOGIN_WINDOW_MS).

'use strict';

const crypto = require('crypto');
const { Client } = require('pg');

const IDLE_MS = 30 * 60 * 1000;
const MAX_SESSIONS = 64;
const LOGIN_FAILURES = 5;
const LOGIN_WINDOW_MS = 60 * 1000;

const sessions = new Map();		// id -> session
const failures = new Map();		// 'ip:…' or 'role:…' -> [times]

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

// may this address try to log in as this role now?
function loginAllowed(ip, role, now = Date.now()) {
	return recentFailures('ip:' + ip, now).length < LOGIN_FAILURES &&
		recentFailures('role:' + role, now).length < LOGIN_FAILURES;
}

function noteFailure(ip, role, now = Date.now()) {
	for (const key of ['ip:' + ip, 'role:' + role]) {
		const list = recentFailures(key, now);
		list.push(now);
		failures.set(key, list);
	}
	// bounded: the oldest keys go first
	while (failures.size > 10000)
		failures.delete(failures.keys().next().value);
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
	if (sessions.size >= MAX_SESSIONS)
		expireOldest();
	const s = {
		id: token(),
		csrf: token(),
		role,
		readOnly: !!readOnly,
		client,
		lastSeen: Date.now(),
		streams: new Set(),
	};
	client.on('end', () => end(s));
	sessions.set(s.id, s);
	return s;
}

function expireOldest() {
	let oldest = null;
	for (const s of sessions.values())
		if (!oldest || s.lastSeen < oldest.lastSeen)
			oldest = s;
	if (oldest)
		end(oldest);
}

function get(id, now = Date.now()) {
	if (typeof id !== 'string')
		return null;
	const s = sessions.get(id);
	if (!s)
		return null;
	if (now - s.lastSeen > IDLE_MS && s.streams.size === 0) {
		end(s);
		return null;
	}
	s.lastSeen = now;
	return s;
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
		if (now - s.lastSeen > IDLE_MS && s.streams.size === 0)
			end(s);
}

function endAll() {
	for (const s of [...sessions.values()])
		end(s);
}

module.exports = {
	login, get, end, sweep, endAll, loginAllowed, noteFailure, sameToken, token,
	count: () => sessions.size,
};
