#!/usr/bin/env node
// web/test/browser.js: the dashboard's suite, in a real browser (Debian's
// Chromium, driven by playwright-core).  scripts/web --test runs it
// against a private cluster it starts (PGHOST, PGPORT, PGDATABASE; the
// superuser RETRIES_WEB_SUPERUSER logs in without a password there, every
// other role with one).  Screenshots of each page go to web/test/out/.
//
// Each check prints "ok N - what" or "not ok N - what"; the exit status is
// the number of failures (0: all passed).

'use strict';

const assert = require('assert');
const fs = require('fs');
const http = require('http');
const path = require('path');
const { Client } = require('pg');
const { chromium } = require('playwright-core');
const { makeServer } = require('../server');

const OUT = path.join(__dirname, 'out');
const DEADLINE_MS = Number(process.env.RETRIES_WEB_DEADLINE_MS || 60000);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const HOSTILE_KEY = '<img src=x onerror="document.title=\'pwned\'">';
const HOSTILE_MESSAGE = '<script>document.title="pwned"</script>';

let failures = 0;
let n = 0;
let onFailure = null;		// what to keep of a failed check (a screenshot)
async function check(name, fn) {
	n++;
	try {
		await fn();
		console.log(`ok ${n} - ${name}`);
	} catch (e) {
		failures++;
		console.log(`not ok ${n} - ${name}`);
		if (onFailure)
			await onFailure(n).catch(() => {});
		console.log(String(e.stack || e).split('\n').map((l) => '# ' + l).join('\n'));
	}
}

// wait until fn() is true, at most DEADLINE_MS
async function until(what, fn) {
	const end = Date.now() + DEADLINE_MS;
	let nap = 50;
	for (;;) {
		if (await fn())
			return;
		if (Date.now() > end)
			throw new Error('waited ' + DEADLINE_MS + ' ms for: ' + what);
		await new Promise((r) => setTimeout(r, nap));
		nap = Math.min(nap * 1.5, 500);
	}
}

const SETUP = `
CREATE EXTENSION IF NOT EXISTS retries;
CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
CREATE ROLE mallory LOGIN PASSWORD 'mallory-pw';
CREATE ROLE boss LOGIN SUPERUSER PASSWORD 'boss-pw';
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
SET ROLE alice;
CREATE TABLE alice.switch (ok boolean NOT NULL);
INSERT INTO alice.switch VALUES (false);
CREATE FUNCTION alice.flaky(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (SELECT ok FROM alice.switch) THEN
		RAISE EXCEPTION 'the API is down' USING ERRCODE = 'RT503', DETAIL = 'attempt for ' || n;
	END IF;
	RETURN n * 2;
END $$;
CREATE FUNCTION alice.ok(n int) RETURNS int LANGUAGE sql AS $$SELECT n$$;
SELECT retries.annotate('alice.flaky(int)', policy => '1 10ms');
SELECT retries.annotate('alice.ok(int)');
SELECT retries.call('alice.flaky(int)', '[1]', key => 'alice-flaky-1');
SELECT retries.call('alice.ok(int)', ('[' || g || ']')::jsonb, key => 'alice-ok-' || g) FROM generate_series(1, 5) g;
RESET ROLE;
SET ROLE mallory;
CREATE FUNCTION mallory.evil(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '%', t USING ERRCODE = 'XX001', HINT = t; END $$;
SELECT retries.annotate('mallory.evil(text)', policy => '1 10ms');
SELECT retries.call('mallory.evil(text)', jsonb_build_array($m$${HOSTILE_MESSAGE}$m$), key => $k$${HOSTILE_KEY}$k$);
RESET ROLE;
`;

async function main() {
	fs.mkdirSync(OUT, { recursive: true });
	const admin = new Client({ user: process.env.RETRIES_WEB_SUPERUSER || 'postgres' });
	await admin.connect();
	await admin.query(SETUP);
	const callOf = async (key) => (await admin.query('SELECT id FROM retries.call_data WHERE key = $1', [key])).rows[0].id;
	const stateOf = async (id) => (await admin.query('SELECT state::text FROM retries.call_data WHERE id = $1', [id])).rows[0].state;
	const flaky = await callOf('alice-flaky-1');
	const evil = await callOf(HOSTILE_KEY);
	await until('the flaky call failed and the hostile one too', async () =>
		(await stateOf(flaky)) === 'failed' && (await stateOf(evil)) === 'failed');

	const server = makeServer({
		host: '127.0.0.1', port: 0, readOnly: false, allowTrust: false,
		pghost: process.env.PGHOST, pgport: Number(process.env.PGPORT),
		database: process.env.PGDATABASE, statementTimeout: 10000,
	});
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	const base = `http://127.0.0.1:${server.address().port}`;

	const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
	const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	const page = await context.newPage();
	const dialogs = [];
	page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
	const shot = (name) => page.screenshot({ path: path.join(OUT, name + '.png'), fullPage: true });
	onFailure = async (i) => {
		await shot('failed-' + i);
		console.log('# page ' + page.url() + ': ' + (await page.textContent('body')).replace(/\s+/g, ' ').slice(0, 500));
		const w = await admin.query(`SELECT pid, backend_type, state, wait_event_type, wait_event, left(query, 80) AS query
			FROM pg_stat_activity WHERE backend_type LIKE 'retries%' OR application_name = 'retries web'`);
		for (const r of w.rows)
			console.log('# ' + JSON.stringify(r));
		const c = await admin.query('SELECT id, state, attempts, next_attempt, held, gate FROM retries.call_data ORDER BY id');
		for (const r of c.rows)
			console.log('# ' + JSON.stringify(r));
	};

	async function login(role, password) {
		await page.goto(base + '/login');
		await page.fill('input[name=role]', role);
		await page.fill('input[name=password]', password);
		await page.click('form.login button');
		await page.waitForLoadState('domcontentloaded');
	}

	try {
		await check('a login the server did not check a password for is refused', async () => {
			await login(process.env.RETRIES_WEB_SUPERUSER || 'postgres', 'anything');
			assert.match(await page.textContent('main'), /without checking a password/);
		});

		await check('a wrong password is refused', async () => {
			await login('alice', 'wrong');
			assert.match(await page.textContent('main'), /Login failed/);
			assert.strictEqual(page.url(), base + '/login');
		});

		await check('alice logs in and sees the overview of her functions', async () => {
			await login('alice', 'alice-pw');
			assert.strictEqual(page.url(), base + '/');
			const text = await page.textContent('main');
			assert.match(text, /alice\.flaky\(integer\)/);
			assert.doesNotMatch(text, /mallory/);
			await shot('overview');
		});

		await check('the session cookie is HttpOnly and SameSite=Strict', async () => {
			const c = (await context.cookies()).find((x) => x.name === 'retries_sid');
			assert.ok(c, 'a session cookie');
			assert.strictEqual(c.httpOnly, true);
			assert.strictEqual(c.sameSite, 'Strict');
			assert.strictEqual(await page.evaluate(() => document.cookie), '');
		});

		await check('alice sees her calls and none of mallory\'s', async () => {
			await page.goto(base + '/calls');
			const text = await page.textContent('main');
			assert.match(text, /alice-flaky-1/);
			assert.match(text, /alice-ok-5/);
			assert.doesNotMatch(text, /mallory|pwned/);
			await shot('calls');
		});

		await check('a filter by state shows only those calls', async () => {
			await page.selectOption('select[name=state]', 'failed');
			await page.click('form.filters button');
			await page.waitForLoadState('domcontentloaded');
			const rows = await page.$$eval('tbody tr', (trs) => trs.map((tr) => tr.textContent));
			assert.strictEqual(rows.length, 1, rows.join(' | '));
			assert.match(rows[0], /alice-flaky-1/);
		});

		await check('mallory\'s call is not found on alice\'s page for it', async () => {
			const r = await page.goto(base + '/calls/' + evil);
			assert.strictEqual(r.status(), 404);
		});

		await check('a call\'s page shows its attempts with their errors', async () => {
			await page.goto(base + '/calls/' + flaky);
			const text = await page.textContent('main');
			assert.match(text, /RT503/);
			assert.match(text, /the API is down/);
			assert.match(text, /attempt for 1/);
			assert.strictEqual(await page.$$eval('ol.timeline li', (l) => l.length), 2);
			await shot('call');
		});

		await check('retry now of the failed call: it succeeds, and the page shows it without a reload by hand', async () => {
			await admin.query('UPDATE alice.switch SET ok = true');
			await page.click('text=Retry now');
			await page.waitForLoadState('domcontentloaded');
			await page.waitForSelector('h1 .state.succeeded', { timeout: DEADLINE_MS });
			assert.strictEqual(await stateOf(flaky), 'succeeded');
			assert.match(await page.textContent('main'), /"2"|2/);
		});

		await check('pause and resume a function from the flow page', async () => {
			await page.goto(base + '/flow');
			await shot('flow');
			const row = page.locator('tr', { hasText: 'alice.ok(integer)' });
			await row.locator('button', { hasText: 'Pause' }).click();
			await page.waitForLoadState('domcontentloaded');
			assert.strictEqual((await admin.query(
				"SELECT paused FROM retries.policies WHERE fn = 'alice.ok(int)'::regprocedure")).rows[0].paused, true);
			await page.locator('tr', { hasText: 'alice.ok(integer)' }).locator('button', { hasText: 'Resume' }).click();
			await page.waitForLoadState('domcontentloaded');
			assert.strictEqual((await admin.query(
				"SELECT paused FROM retries.policies WHERE fn = 'alice.ok(int)'::regprocedure")).rows[0].paused, false);
		});

		await check('an action of another role\'s call shows PostgreSQL\'s error', async () => {
			const r = await page.evaluate(async ([id, csrf]) => {
				const body = new URLSearchParams({ id: String(id), csrf });
				const res = await fetch('/act/cancel', { method: 'POST', body });
				return [res.status, await res.text()];
			}, [evil, await page.getAttribute('body', 'data-csrf')]);
			assert.strictEqual(r[0], 400, r[1]);
			assert.match(r[1], /ERROR/);
			assert.strictEqual(await stateOf(evil), 'failed');
		});

		await check('a forged cross-site form is refused', async () => {
			// a page of another origin that posts to the dashboard at once
			const evilSite = http.createServer((req, res) => {
				res.setHeader('Content-Type', 'text/html');
				res.end(`<form id="f" method="post" action="${base}/act/pause">
<input name="fn" value="alice.ok(int)"><input name="csrf" value="guess"></form>
<script>document.getElementById('f').submit()</script>`);
			});
			await new Promise((r) => evilSite.listen(0, '127.0.0.1', r));
			const other = await context.newPage();
			const done = other.waitForResponse((r) => r.url().startsWith(base + '/act/pause'));
			await other.goto(`http://localhost:${evilSite.address().port}/`);
			const res = await done;
			assert.strictEqual(res.status(), 403);
			await other.close();
			evilSite.close();
			assert.strictEqual((await admin.query(
				"SELECT paused FROM retries.policies WHERE fn = 'alice.ok(int)'::regprocedure")).rows[0].paused, false);
		});

		await check('an action without the session\'s CSRF token is refused', async () => {
			const status = await page.evaluate(async () => {
				const res = await fetch('/act/pause', { method: 'POST', body: new URLSearchParams({ fn: 'alice.ok(int)', csrf: 'x' }) });
				return res.status;
			});
			assert.strictEqual(status, 403);
		});

		await check('log out ends the session', async () => {
			await page.goto(base + '/calls');
			await page.click('header form button');
			await page.waitForLoadState('domcontentloaded');
			assert.strictEqual(page.url(), base + '/login');
			await page.goto(base + '/calls');
			assert.strictEqual(page.url(), base + '/login');
		});

		await check('a superuser sees mallory\'s markup as text: nothing of it runs', async () => {
			await login('boss', 'boss-pw');
			await page.goto(base + '/calls');
			const cell = await page.locator('td', { hasText: '<img src=x' }).first().textContent();
			assert.strictEqual(cell, HOSTILE_KEY);
			assert.match(await page.textContent('main'), /<script>document\.title/);
			await page.goto(base + '/calls/' + evil);
			await shot('hostile');
			assert.match(await page.textContent('main'), /<script>document\.title="pwned"<\/script>/);
			assert.strictEqual(await page.evaluate(() => document.querySelectorAll('main script, main img').length), 0);
			assert.notStrictEqual(await page.title(), 'pwned');
			assert.deepStrictEqual(dialogs, []);
		});

		await check('a read-only session shows no action and refuses one', async () => {
			await page.click('header form button');
			await page.waitForLoadState('domcontentloaded');
			await page.fill('input[name=role]', 'alice');
			await page.fill('input[name=password]', 'alice-pw');
			await page.check('input[name=read_only]');
			await page.click('form.login button');
			await page.waitForLoadState('domcontentloaded');
			await page.goto(base + '/flow');
			assert.strictEqual(await page.locator('main button').count(), 0);
			const status = await page.evaluate(async () => {
				const csrf = document.body.getAttribute('data-csrf');
				const res = await fetch('/act/pause', { method: 'POST', body: new URLSearchParams({ fn: 'alice.ok(int)', csrf }) });
				return res.status;
			});
			assert.strictEqual(status, 403);
		});

		await check('the schedules, workers and events pages load', async () => {
			await page.goto(base + '/schedules');
			await shot('schedules');
			await page.goto(base + '/workers');
			await shot('workers');
			await page.goto(base + '/events');
			await shot('events');
			assert.match(await page.textContent('h1'), /Events/);
		});

		// the rest over HTTP from here, as a client of the dashboard's own
		// address (the same client for every check: the limits below count
		// the earlier failed logins too)
		const cookieOf = (res) => String(res.headers.get('set-cookie') || '').split(';')[0];
		const post = (p, body, headers = {}) => fetch(base + p, {
			method: 'POST', redirect: 'manual', headers: { Origin: base, ...headers },
			body: new URLSearchParams(body),
		});

		await check('a request under another host name (DNS rebinding) is refused', async () => {
			const status = await new Promise((resolve, reject) => {
				const req = http.request(base + '/login', {
					method: 'POST',
					headers: { Host: 'attacker.example:' + server.address().port, Origin: 'http://attacker.example:' + server.address().port,
						'Content-Type': 'application/x-www-form-urlencoded' },
				}, (res) => { res.resume(); resolve(res.statusCode); });
				req.on('error', reject);
				req.end('role=alice&password=alice-pw');
			});
			assert.strictEqual(status, 421);
		});

		const boss = cookieOf(await post('/login', { role: 'boss', password: 'boss-pw' }));
		assert.match(boss, /^retries_sid=/);
		const get = (p, cookie) => fetch(base + p, { redirect: 'manual', headers: { Cookie: cookie } });

		await check('an action name of Object\'s prototype is no action', async () => {
			const page = await (await get('/events', boss)).text();
			const csrf = page.match(/data-csrf="([^"]+)"/)[1];
			const res = await post('/act/__proto__', { csrf }, { Cookie: boss });
			assert.strictEqual(res.status, 404);
		});

		await check('a message in the URL is not shown on the page', async () => {
			const page = await (await get('/calls?done=log+in+again+at+evil.example', boss)).text();
			assert.doesNotMatch(page, /evil\.example/);
		});

		await check('two session cookies are no session', async () => {
			const mallory = cookieOf(await post('/login', { role: 'mallory', password: 'mallory-pw' }));
			const res = await get('/calls', boss + '; ' + mallory);
			assert.strictEqual(res.status, 303);
			assert.strictEqual(res.headers.get('location'), '/login');
		});

		await check('one role\'s logins do not end another role\'s session', async () => {
			for (let i = 0; i < 12; i++)
				assert.strictEqual((await post('/login', { role: 'mallory', password: 'mallory-pw' })).status, 303);
			assert.strictEqual((await get('/calls', boss)).status, 200);
		});

		await check('a role name with a control character is refused', async () => {
			const res = await post('/login', { role: 'boss\u0000user\u0000mallory', password: 'mallory-pw' });
			assert.strictEqual(res.status, 400);
		});

		await check('a right password of a role that may not log in reads as a wrong one', async () => {
			await admin.query("CREATE ROLE carol NOLOGIN PASSWORD 'carol-pw'");
			const text = await (await post('/login', { role: 'carol', password: 'carol-pw' })).text();
			assert.match(text, /Login failed\./);
			assert.doesNotMatch(text, /not permitted|carol/);
		});

		await check('failed logins are limited, also when made at once', async () => {
			const tries = await Promise.all(Array.from({ length: 20 }, (_, i) =>
				post('/login', { role: 'boss', password: 'guess' + i }).then((r) => r.status)));
			const checked = tries.filter((st) => st === 401).length;
			assert.ok(checked <= 5, `${checked} wrong passwords reached PostgreSQL: ${tries}`);
			assert.strictEqual(tries.filter((st) => st === 429).length, 20 - checked);
		});
	} finally {
		await browser.close();
		server.close();
		require('../lib/sessions').endAll();
		await admin.end();
	}
	console.log(`1..${n}`);
	process.exit(failures);
}

main().catch((e) => {
	console.log('not ok - the suite could not run: ' + (e.stack || e));
	process.exit(100);
});
