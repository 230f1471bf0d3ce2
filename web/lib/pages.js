// web/lib/pages.js: the pages, each a query of the extension's views as
// the session's role and its HTML.  Queries take their inputs only as
// parameters ($1, $2, ...): no SQL is built from what a browser sends.
// Every text shown goes through h`` (html.js).

'use strict';

const { h, qs, Safe } = require('./html');

const PAGE_SIZE = 50;
// the most rows a page of a list shows (a role's events, schedules and
// functions can be many: a page of all of them was 212 MB), and the most
// characters of one text a list shows
const LIST_LIMIT = 500;
const CELL_CHARS = 1000;
const STATES = ['scheduled', 'running', 'succeeded', 'failed', 'cancelled'];

function layout(s, title, body, opts = {}) {
	const nav = [
		['/', 'Overview'], ['/calls', 'Calls'], ['/schedules', 'Schedules'],
		['/flow', 'Flow control'], ['/workers', 'Workers'], ['/events', 'Events'],
	];
	return h`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · retries</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
</head><body data-csrf="${s ? s.csrf : ''}">
<header><a class="brand" href="/">retries</a>
${s ? h`<nav>${nav.map(([href, name]) => h`<a href="${href}"${opts.nav === href ? new Safe(' class="here"') : ''}>${name}</a>`)}</nav>
<span class="who">${s.role}${s.readOnly ? ' (read-only)' : ''}</span>
<form method="post" action="/logout" class="inline"><input type="hidden" name="csrf" value="${s.csrf}"><button>Log out</button></form>` : ''}
</header>
<main>
${opts.flash ? h`<p class="flash ${opts.flash.kind}">${opts.flash.text}</p>` : ''}
${body}
</main></body></html>`;
}

// a PostgreSQL error as PostgreSQL gives it
function pgError(e) {
	return h`<div class="pgerror"><b>ERROR ${e.code || ''}</b>: ${e.message}
${e.detail ? h`<br>DETAIL: ${e.detail}` : ''}${e.hint ? h`<br>HINT: ${e.hint}` : ''}</div>`;
}

function loginPage(error, database) {
	return layout(null, 'Log in', h`<h1>Log in</h1>
<p>As a PostgreSQL role of database <b>${database}</b>: you see and do what the role may.</p>
${error ? h`<p class="flash error">${error}</p>` : ''}
<form method="post" action="/login" class="login">
<label>Role <input name="role" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<label class="check"><input type="checkbox" name="read_only" value="1"> Read-only</label>
<button>Log in</button>
</form>`);
}

function table(columns, rows, cell) {
	return h`<table><thead><tr>${columns.map((c) => h`<th>${c}</th>`)}</tr></thead>
<tbody>${rows.map((r) => h`<tr>${columns.map((c) => h`<td>${cell ? cell(c, r) : show(r[c])}</td>`)}</tr>`)}</tbody></table>`;
}

function show(v) {
	if (v === null || v === undefined)
		return '';
	if (v instanceof Date)
		return v.toISOString().replace('T', ' ').replace('Z', '');
	const text = typeof v === 'object' ? JSON.stringify(v) : String(v);
	return text.length > CELL_CHARS ? text.slice(0, CELL_CHARS) + '…' : text;
}

// rows beyond LIST_LIMIT: a note, the extra row dropped
function limited(rows) {
	if (rows.length <= LIST_LIMIT)
		return [rows, ''];
	return [rows.slice(0, LIST_LIMIT), h`<p class="note">Only the first ${LIST_LIMIT} are shown.</p>`];
}

function actionButton(s, action, fields, label, cls = '') {
	if (s.readOnly)
		return '';
	return h`<form method="post" action="${action}" class="inline">
<input type="hidden" name="csrf" value="${s.csrf}">
${Object.entries(fields).map(([k, v]) => h`<input type="hidden" name="${k}" value="${v}">`)}
<button class="${cls}">${label}</button></form>`;
}

// a bar chart, in SVG made here, of per-minute counts
function chart(points, key, label) {
	const width = 600;
	const height = 60;
	const max = Math.max(1, ...points.map((p) => Number(p[key])));
	const bar = width / 60;
	const bars = points.map((p) => {
		const hgt = Math.round((Number(p[key]) / max) * (height - 2));
		const x = Math.round((59 - p.ago) * bar);
		return h`<rect x="${x}" y="${height - hgt}" width="${Math.max(1, Math.floor(bar) - 1)}" height="${hgt}"><title>${p[key]} ${label}, ${p.ago} min ago</title></rect>`;
	});
	return h`<figure class="chart ${key}"><figcaption>${label} per minute, last hour (max ${max})</figcaption>
<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img">${bars}</svg></figure>`;
}

async function overview(s, flash) {
	const stats = await s.client.query(`
SELECT fn::text AS function, scheduled, held, running, succeeded, failed, cancelled,
       retries, success_ratio, mean_attempt_time::text AS mean_attempt,
       p95_attempt_time::text AS p95_attempt, oldest_due_lag::text AS oldest_due_lag, paused
  FROM retries.stats ORDER BY fn::text LIMIT ${LIST_LIMIT + 1}`);
	const [statRows, statNote] = limited(stats.rows);
	const perMinute = await s.client.query(`
SELECT (extract(epoch FROM date_trunc('minute', now()) - date_trunc('minute', finished_at)) / 60)::int AS ago,
       count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE outcome IN ('failed', 'retry', 'timeout', 'interrupted')) AS failed
  FROM retries.attempts
 WHERE finished_at > date_trunc('minute', now()) - interval '59 minutes'
 GROUP BY 1 ORDER BY 1`);
	const cols = ['function', 'scheduled', 'held', 'running', 'succeeded', 'failed', 'cancelled',
		'retries', 'success_ratio', 'mean_attempt', 'p95_attempt', 'oldest_due_lag', 'paused'];
	return layout(s, 'Overview', h`<h1>Overview</h1>
${chart(perMinute.rows, 'succeeded', 'attempts succeeded')}
${chart(perMinute.rows, 'failed', 'attempts failed or retried')}
<h2>Functions</h2>
${table(cols, statRows, (c, r) => {
		if (c === 'function')
			return h`<a href="/calls${qs({ fn: r.function })}">${r.function}</a>`;
		if ((c === 'failed' || c === 'held' || c === 'scheduled' || c === 'running' || c === 'succeeded' || c === 'cancelled') && Number(r[c]) > 0 && c !== 'held')
			return h`<a href="/calls${qs({ fn: r.function, state: c })}">${r[c]}</a>`;
		return show(r[c]);
	})}${statNote}`, { nav: '/', flash });
}

// the filters of the calls page, as given (strings), and their SQL
function callFilters(q) {
	const f = {
		state: STATES.includes(q.state) ? q.state : '',
		fn: typeof q.fn === 'string' ? q.fn.slice(0, 1000) : '',
		key: typeof q.key === 'string' ? q.key.slice(0, 1000) : '',
		sqlstate: typeof q.sqlstate === 'string' ? q.sqlstate.slice(0, 5) : '',
		since: typeof q.since === 'string' && /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$/.test(q.since) ? q.since : '',
		before: typeof q.before === 'string' && /^\d{1,19}$/.test(q.before) ? q.before : '',
	};
	const where = [];
	const params = [];
	const add = (cond, value) => {
		params.push(value);
		where.push(cond.replace('?', '$' + params.length));
	};
	if (f.state)
		add('state = ?::retries.call_state', f.state);
	if (f.fn)
		add('fn::text = ?', f.fn);
	if (f.key)
		add('key = ?', f.key);
	if (f.sqlstate)
		add('last_sqlstate = ?', f.sqlstate);
	if (f.since)
		add('created_at >= ?::timestamptz', f.since);
	if (f.before)
		add('id < ?::bigint', f.before);
	return { f, where, params };
}

// the calls page: retries.recent_calls is retries.calls newest first, and
// the page takes the first rows, with no ORDER BY, which would sort every
// call of the role again (retries.calls ordered here: 2 s with a million)
async function calls(s, q, flash) {
	const { f, where, params } = callFilters(q);
	const res = await s.client.query(`
SELECT id, fn::text AS function, state::text AS state, attempts, next_attempt, created_at,
       updated_at, key, last_sqlstate, last_message, schedule
  FROM retries.recent_calls
 ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
 LIMIT ${PAGE_SIZE + 1}`, params);
	const rows = res.rows.slice(0, PAGE_SIZE);
	const more = res.rows.length > PAGE_SIZE;
	const next = more ? qs({ ...f, before: rows[rows.length - 1].id }) : null;
	const cols = ['id', 'function', 'state', 'attempts', 'next_attempt', 'created_at', 'key',
		'last_sqlstate', 'last_message', 'schedule'];
	return layout(s, 'Calls', h`<h1>Calls</h1>
<form method="get" action="/calls" class="filters">
<label>State <select name="state"><option value="">any</option>${STATES.map((st) => h`<option${st === f.state ? new Safe(' selected') : ''}>${st}</option>`)}</select></label>
<label>Function <input name="fn" value="${f.fn}" placeholder="name(argtypes)"></label>
<label>Key <input name="key" value="${f.key}"></label>
<label>SQLSTATE <input name="sqlstate" value="${f.sqlstate}" size="5"></label>
<label>Since <input name="since" value="${f.since}" placeholder="YYYY-MM-DD[THH:MM]"></label>
<button>Filter</button> <a href="/calls">clear</a>
</form>
<div class="live" data-live-calls="${rows.map((r) => r.id).join(',')}" data-live-known="${rows.map(known).join(',')}">
${table(cols, rows, (c, r) => {
		if (c === 'id')
			return h`<a href="/calls/${r.id}">${r.id}</a>`;
		if (c === 'state')
			return h`<span class="state ${r.state}" data-call="${r.id}" data-field="state">${r.state}</span>`;
		if (c === 'attempts')
			return h`<span data-call="${r.id}" data-field="attempts">${r.attempts}</span>`;
		if (c === 'last_message')
			return h`<span class="msg" data-call="${r.id}" data-field="last_message">${show(r.last_message)}</span>`;
		return show(r[c]);
	})}
</div>
${rows.length === 0 ? h`<p>No call matches.</p>` : ''}
${next ? h`<p><a href="/calls${next}" rel="next">Older calls</a></p>` : ''}`, { nav: '/calls', flash });
}

async function call(s, id, flash) {
	const c = await s.client.query(`
SELECT id, fn::text AS function, args, state::text AS state, attempts, max_attempts,
       next_attempt, created_at, updated_at, scheduled_by::text AS scheduled_by, key,
       last_sqlstate, last_message, schedule, priority, limit_key, result, waiting_for,
       command, waiting_for_event, database
  FROM retries.calls WHERE id = $1::bigint`, [id]);
	if (c.rows.length === 0)
		return null;
	const r = c.rows[0];
	const attempts = await s.client.query(`
SELECT attempt, outcome::text AS outcome, started_at, finished_at,
       round((extract(epoch FROM finished_at - started_at) * 1000)::numeric, 1) AS ms,
       sqlstate, message, detail, hint, context, next_delay::text AS next_delay, command_tag, pid
  FROM retries.attempts WHERE call_id = $1::bigint ORDER BY attempt`, [id]);
	const fields = ['function', 'state', 'attempts', 'max_attempts', 'next_attempt', 'created_at',
		'updated_at', 'scheduled_by', 'key', 'schedule', 'priority', 'limit_key', 'command',
		'waiting_for_event', 'database', 'last_sqlstate', 'last_message'];
	const finished = ['succeeded', 'failed', 'cancelled'].includes(r.state);
	const actions = s.readOnly ? '' : h`<div class="actions">
${actionButton(s, '/act/retry_now', { id: r.id }, 'Retry now')}
${!finished ? actionButton(s, '/act/cancel', { id: r.id }, 'Cancel', 'danger') : ''}
<form method="post" action="/act/reschedule" class="inline">
<input type="hidden" name="csrf" value="${s.csrf}"><input type="hidden" name="id" value="${r.id}">
<input name="at" placeholder="YYYY-MM-DD HH:MM:SS+00" required><button>Reschedule</button></form>
</div>`;
	return layout(s, `Call ${r.id}`, h`<h1>Call ${r.id} <span class="state ${r.state}" data-call="${r.id}" data-field="state">${r.state}</span></h1>
<div class="live" data-live-calls="${r.id}" data-live-known="${known(r)}" data-reload-on-change="1"></div>
${actions}
<dl class="fields">${fields.map((k) => h`<dt>${k}</dt><dd>${show(r[k])}</dd>`)}</dl>
<h2>Arguments</h2><pre class="json">${JSON.stringify(r.args, null, 2)}</pre>
<h2>Result</h2><pre class="json">${r.result === null ? '' : JSON.stringify(r.result, null, 2)}</pre>
<h2>Chain</h2>
<p>Runs after: ${(r.waiting_for || []).length ? (r.waiting_for || []).map((w) => h`<a href="/calls/${w}">${w}</a> `) : 'nothing it still waits for'}</p>
<h2>Attempts</h2>
<ol class="timeline">${attempts.rows.map((a) => h`<li class="attempt ${a.outcome}">
<div><b>#${a.attempt}</b> <span class="state ${a.outcome}">${a.outcome}</span> ${show(a.started_at)} · ${a.ms} ms ${a.sqlstate ? h`· <code>${a.sqlstate}</code>` : ''} ${a.next_delay ? h`· next in ${a.next_delay}` : ''} ${a.command_tag ? h`· ${a.command_tag}` : ''}</div>
${a.message ? h`<div class="msg">${a.message}</div>` : ''}
${a.detail ? h`<div>DETAIL: ${a.detail}</div>` : ''}
${a.hint ? h`<div>HINT: ${a.hint}</div>` : ''}
${a.context ? h`<pre class="context">${a.context}</pre>` : ''}
</li>`)}</ol>
${attempts.rows.length === 0 ? h`<p>No attempt has finished yet.</p>` : ''}`, { nav: '/calls', flash });
}

async function schedules(s, flash) {
	const res = await s.client.query(`
SELECT name, fn::text AS function, every, timezone, paused, next_run, last_run, last_call,
       last_state::text AS last_state, firings, skipped, missed, owner::text AS owner, command
  FROM retries.schedules ORDER BY name, owner::text LIMIT ${LIST_LIMIT + 1}`);
	const [rows, note] = limited(res.rows);
	const cols = ['name', 'function', 'every', 'timezone', 'next_run', 'last_run', 'last_call',
		'last_state', 'firings', 'skipped', 'missed', 'owner', 'paused', 'actions'];
	return layout(s, 'Schedules', h`<h1>Schedules</h1>
${table(cols, rows, (c, r) => {
		if (c === 'last_call' && r.last_call)
			return h`<a href="/calls/${r.last_call}">${r.last_call}</a>`;
		if (c === 'function' && r.command)
			return h`<code>${r.command}</code>`;
		if (c === 'actions') {
			if (r.owner !== s.role)
				return '';
			return h`${r.paused ? actionButton(s, '/act/resume_schedule', { name: r.name }, 'Resume') : actionButton(s, '/act/pause_schedule', { name: r.name }, 'Pause')}
${actionButton(s, '/act/trigger', { name: r.name }, 'Run now')}`;
		}
		return show(r[c]);
	})}${note}`, { nav: '/schedules', flash });
}

async function flow(s, flash) {
	const res = await s.client.query(`
SELECT p.fn::text AS function, p.owner::text AS owner, p.policy, p.max_running,
       p.max_running_per_key, p.rate, p.paused, coalesce(st.held, 0) AS held,
       coalesce(st.scheduled, 0) AS scheduled
  FROM retries.policies p LEFT JOIN retries.stats st ON st.fn = p.fn
 ORDER BY p.fn::text LIMIT ${LIST_LIMIT + 1}`);
	const [rows, note] = limited(res.rows);
	const cols = ['function', 'owner', 'policy', 'max_running', 'max_running_per_key', 'rate',
		'held', 'scheduled', 'paused', 'actions'];
	return layout(s, 'Flow control', h`<h1>Flow control</h1>
<p>Limits and pauses per function; a held call waits, uncharged, for room.</p>
${table(cols, rows, (c, r) => {
		if (c === 'actions')
			return r.paused ? actionButton(s, '/act/resume', { fn: r.function }, 'Resume') :
				actionButton(s, '/act/pause', { fn: r.function }, 'Pause', 'danger');
		return show(r[c]);
	})}${note}`, { nav: '/flow', flash });
}

async function workers(s, flash) {
	const res = await s.client.query(`SELECT * FROM retries.workers ORDER BY database, pid LIMIT ${LIST_LIMIT + 1}`);
	const cols = res.fields.map((f) => f.name);
	const [rows, note] = limited(res.rows);
	return layout(s, 'Workers', h`<h1>Workers</h1>${table(cols, rows)}${note}`, { nav: '/workers', flash });
}

async function events(s, flash) {
	const res = await s.client.query(`
SELECT role::text AS role, left(event, ${CELL_CHARS}) AS event,
       left(payload::text, ${CELL_CHARS}) AS payload, emitted_at, waiting
  FROM retries.events
 ORDER BY emitted_at DESC NULLS LAST, role::text, event LIMIT ${LIST_LIMIT + 1}`);
	const [rows, note] = limited(res.rows);
	return layout(s, 'Events', h`<h1>Events</h1>
<p>The latest emitted first.</p>
${table(['role', 'event', 'payload', 'emitted_at', 'waiting'], rows)}${note}
${s.readOnly ? '' : h`<h2>Emit an event</h2>
<form method="post" action="/act/emit" class="filters">
<input type="hidden" name="csrf" value="${s.csrf}">
<label>Event <input name="event" required></label>
<label>Payload (JSON) <input name="payload" placeholder="null"></label>
<button>Emit</button></form>`}`, { nav: '/events', flash });
}

// the actions: each one call of the SQL API, as the session's role
const ACTIONS = {
	retry_now: { sql: 'SELECT retries.retry_now($1::bigint)', args: ['id'], back: (b) => '/calls/' + encodeURIComponent(b.id) },
	cancel: { sql: 'SELECT retries.cancel($1::bigint)', args: ['id'], back: (b) => '/calls/' + encodeURIComponent(b.id) },
	reschedule: { sql: 'SELECT retries.reschedule($1::bigint, $2::timestamptz)', args: ['id', 'at'], back: (b) => '/calls/' + encodeURIComponent(b.id) },
	pause: { sql: 'SELECT retries.pause($1::regprocedure)', args: ['fn'], back: () => '/flow' },
	resume: { sql: 'SELECT retries.resume($1::regprocedure)', args: ['fn'], back: () => '/flow' },
	pause_schedule: { sql: 'SELECT retries.pause_schedule($1)', args: ['name'], back: () => '/schedules' },
	resume_schedule: { sql: 'SELECT retries.resume_schedule($1)', args: ['name'], back: () => '/schedules' },
	trigger: { sql: 'SELECT retries.trigger($1)', args: ['name'], back: () => '/schedules' },
	emit: { sql: 'SELECT retries.emit($1, $2::jsonb)', args: ['event', 'payload'], back: () => '/events' },
};

// what a page showed of a call, for the live stream to compare with
// (server.js, live): the stream reports what changed since the page was
// made, not since it started
function known(r) {
	return `${r.id}:${r.state}:${r.attempts}`;
}

// the live state of some calls (the page's SSE stream asks every second)
async function liveCalls(s, ids) {
	const res = await s.client.query(`
SELECT id, state::text AS state, attempts, last_message, updated_at
  FROM retries.calls WHERE id = ANY($1::bigint[])`, [ids]);
	return res.rows;
}

module.exports = {
	layout, loginPage, pgError, overview, calls, call, schedules, flow, workers, events,
	ACTIONS, liveCalls, callFilters,
};
