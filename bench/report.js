// bench/report.js: turn the measurements of bench/run into the report.
//
//   node report.js RESULTS OUTDIR
//
// RESULTS holds `key value` lines.  Writes OUTDIR/benchmarks.md (the tables
// and how to reproduce), OUTDIR/throughput.dat and OUTDIR/latency.dat (for
// bench/chart.gp), and prints the summary table.  The targets are those of
// the benchmark issue; each is a ratio between two things measured in the
// same run, or a bound on a latency.

'use strict';

const fs = require('fs');
const path = require('path');

const [resultsFile, outDir] = process.argv.slice(2);
const r = {};
for (const line of fs.readFileSync(resultsFile, 'utf8').split('\n')) {
	const at = line.indexOf(' ');
	if (at > 0)
		r[line.slice(0, at)] = line.slice(at + 1);
}
const num = (key) => {
	if (!(key in r))
		throw new Error(`report.js: no measurement "${key}"`);
	return Number(r[key]);
};
const fmt = (v) => Math.round(v).toLocaleString('en-US');
const ms = (v) => `${v.toFixed(2)} ms`;
const x = (v) => `${v.toFixed(2)}×`;

// paired(KEY, REF): for a measurement taken in runs alternating with its
// reference (KEY_1 right after or before REF_1, and so on), the pair whose
// ratio is the median of the pairs' (the lower middle one for an even
// count): the machine drifts over a long run, and each pair shares its
// minutes.  Without numbered runs, KEY against REF.
const paired = (key, ref) => {
	const pairs = Object.keys(r)
		.filter((k) => new RegExp(`^${key}_\\d+$`).test(k) && `${ref}_${k.slice(key.length + 1)}` in r)
		.map((k) => {
			const ours = num(k);
			const theirs = num(`${ref}_${k.slice(key.length + 1)}`);
			return { ours, theirs, ratio: ours / theirs };
		})
		.sort((a, b) => a.ratio - b.ratio);
	if (pairs.length === 0)
		return { ours: num(key), theirs: num(ref), ratio: num(key) / num(ref), n: 0 };
	return { ...pairs[Math.floor((pairs.length - 1) / 2)], n: pairs.length,
			 all: pairs.map((p) => x(p.ratio)) };
};
// pairedTarget(WHAT, KEY, REF, GOAL, HOLDS): a target on paired(KEY, REF)
const pairedTarget = (what, key, ref, goal, holds) => {
	const p = paired(key, ref);
	const how = p.n > 1 ? ` (median of ${p.n} back-to-back pairs: ${p.all.join(', ')})`
		: p.n === 1 ? ' (back to back)' : '';
	target(what + how, `${fmt(p.ours)}/s`, `${fmt(p.theirs)}/s`, x(p.ratio), goal, holds(p.ratio));
};

const n = num('n');
const future = num('future');
const drain = num('drain_retries');

// [what, retries, reference, ratio or value, target, holds]
const rows = [];
const target = (what, ours, ref, value, goal, holds) =>
	rows.push({ what, ours, ref, value, goal, holds });

pairedTarget(`Drain ${fmt(n)} calls vs batched ceiling (its best client count in each run)`,
	'drain_retries', 'batched_run', '≥ 1.00×', (v) => v >= 1);
target(`Drain vs graphile-worker's best (concurrency ${r.graphile_concurrency})`,
	   `${fmt(drain)}/s`, `${fmt(num('graphile'))}/s`,
	   x(drain / num('graphile')), '≥ 10×', drain / num('graphile') >= 10);
target(`Drain vs per-commit ceiling (${r.per_commit_clients} clients)`,
	   `${fmt(drain)}/s`, `${fmt(num('per_commit'))}/s`,
	   x(drain / num('per_commit')), '—', null);
target('Drain vs pg-boss', `${fmt(drain)}/s`, `${fmt(num('pgboss'))}/s`,
	   x(drain / num('pgboss')), '—', null);
for (const p of ['p50', 'p95', 'p99']) {
	const ours = num(`latency_${p}_ms`);
	const theirs = num(`graphile_latency_${p}_ms`);
	const bound = { p50: 1, p95: null, p99: 5 }[p];
	target(`Pick-up latency ${p} vs graphile-worker`, ms(ours), ms(theirs),
		   x(ours / theirs),
		   bound ? `≤ ${bound} ms and below graphile-worker` : 'below graphile-worker',
		   (bound === null || ours <= bound) && ours < theirs);
}
target('Due-time lateness p50', ms(num('due_p50_ms')), '—', ms(num('due_p50_ms')), '—', null);
target('Due-time lateness p99', ms(num('due_p99_ms')), '—', ms(num('due_p99_ms')),
	   '≤ 10 ms', num('due_p99_ms') <= 10);
target('Due-time: earliest start (never early)', ms(num('due_min_ms')), '—',
	   ms(num('due_min_ms')), '≥ 0 ms', num('due_min_ms') >= 0);
target('Retry delay lateness p50 / p99 (vs attempt end + formula delay)',
	   `${ms(num('retry_delay_p50_ms'))} / ${ms(num('retry_delay_p99_ms'))}`, '—',
	   ms(num('retry_delay_p99_ms')), '≤ 10 ms (p99)', num('retry_delay_p99_ms') <= 10);
target('Retry delays that differ from the formula', r.retry_delay_off_formula, '—',
	   r.retry_delay_off_formula, '0', num('retry_delay_off_formula') === 0);
target(`Scheduling ${fmt(n)} calls in one statement vs graphile-worker add_jobs`,
	   `${fmt(num('schedule_retries'))}/s`, `${fmt(num('schedule_graphile'))}/s`,
	   x(num('schedule_retries') / num('schedule_graphile')), '≥ 1×',
	   num('schedule_retries') >= num('schedule_graphile'));
target(`Idle worker CPU with ${fmt(future)} future calls, over 10 s`,
	   `${r.idle_cpu_pct}% (${r.idle_cpu_ticks} ticks)`, '—', `${r.idle_cpu_pct}%`,
	   '< 1% of a core', num('idle_cpu_pct') < 1);
pairedTarget(`Drain ${fmt(n)} due calls beside ${fmt(future)} future ones vs drain`,
	'drain_scale', 'drain_scale_ref', '≥ 0.80×', (v) => v >= 0.8);
pairedTarget('Retry-heavy (2 retries per call) finished calls vs drain',
	'retry_heavy', 'retry_heavy_ref', '≥ 0.50×', (v) => v >= 0.5);
pairedTarget('Drain of calls made by 10 roles, interleaved, vs calls of one role',
	'drain_roles', 'drain_roles_ref', '≥ 0.90×', (v) => v >= 0.9);
pairedTarget('Drain with max_running 10, which does not bind, vs drain',
	'drain_limited', 'drain_flow_ref', '≥ 0.90×', (v) => v >= 0.9);
pairedTarget(`Drain beside ${fmt(num('held'))} held calls of a paused function vs drain`,
	'drain_beside_held', 'drain_held_ref', '≥ 0.90×', (v) => v >= 0.9);
target(`Idle worker CPU beside ${fmt(num('held'))} held calls of a paused function, over 10 s`,
	   `${r.idle_held_cpu_pct}% (${r.idle_held_cpu_ticks} ticks)`, '—', `${r.idle_held_cpu_pct}%`,
	   '< 1% of a core', num('idle_held_cpu_pct') < 1);
target('Rate 1000/1s: starts in the busiest 990 ms vs the limit',
	   `${fmt(num('rate_busiest_window'))}`, `${fmt(num('rate_limit'))}`,
	   x(num('rate_busiest_window') / num('rate_limit')), '≤ 1×',
	   num('rate_busiest_window') <= num('rate_limit'));
target('Rate 1000/1s: starts a second achieved vs the limit',
	   `${fmt(num('rate_achieved'))}/s`, `${fmt(num('rate_limit'))}/s`,
	   x(num('rate_achieved') / num('rate_limit')), '≥ 0.90×',
	   num('rate_achieved') / num('rate_limit') >= 0.9);
target('retries.wait() return after the finishing commit (a cancel), p50 / p99',
	   `${ms(num('wake_p50_ms'))} / ${ms(num('wake_p99_ms'))}`, '—',
	   ms(num('wake_p50_ms')), '≤ 1 ms (p50)', num('wake_p50_ms') <= 1);
target("retries.wait() return after a worker's success (from the attempt's start), p50 / p99",
	   `${ms(num('wake_worker_p50_ms'))} / ${ms(num('wake_worker_p99_ms'))}`, '—',
	   ms(num('wake_worker_p50_ms')), '—', null);
target(`Chain of ${fmt(num('chain'))} calls, each after the one before: per link p50 / p99`,
	   `${ms(num('chain_link_p50_ms'))} / ${ms(num('chain_link_p99_ms'))}`, '—',
	   `${r.chain_total_s} s in all`, '—', null);
target(`Fan-out: ${fmt(num('chain'))} calls after one, started a second vs drain`,
	   `${fmt(num('fan_out_rate'))}/s`, `${fmt(drain)}/s`,
	   x(num('fan_out_rate') / drain), '≥ 0.90×', num('fan_out_rate') / drain >= 0.9);
target(`Fan-in: one call after ${fmt(num('chain'))}, started a second vs drain`,
	   `${fmt(num('fan_in_rate'))}/s`, `${fmt(drain)}/s`,
	   x(num('fan_in_rate') / drain), '—', null);
target('Fan-in: the last call\'s start after the last of those it runs after',
	   ms(num('fan_in_last_ms')), '—', ms(num('fan_in_last_ms')), '—', null);
const anonMb = num('anon_growth_kb') / 1024;
target(`Worker private memory growth over ${fmt(future)} calls`,
	   `${anonMb.toFixed(2)} MB`, '—', `${anonMb.toFixed(2)} MB`, '≤ 5 MB',
	   anonMb <= 5);

const judged = rows.filter((row) => row.holds !== null);
const held = judged.filter((row) => row.holds).length;
const mark = (h) => (h === null ? '' : h ? 'yes' : '**no**');

const targetTable = [
	'| measurement | retries | reference | ratio / value | target | holds |',
	'|---|---:|---:|---:|---|---|',
	...rows.map((row) => `| ${row.what} | ${row.ours} | ${row.ref} | ${row.value} | ${row.goal} | ${mark(row.holds)} |`),
].join('\n');

const sweep = (prefix, label) => Object.keys(r)
	.filter((k) => k.startsWith(prefix) && /_c\d+$/.test(k))
	.map((k) => `${label} ${k.replace(/.*_c/, '')}: ${fmt(num(k))}/s`)
	.join('; ');

// runs: what the repeated runs of a step gave, for the tables
const runs = (key) => {
	const all = Object.keys(r).filter((k) => new RegExp(`^${key}_\\d+$`).test(k));
	return `${all.length} runs (${all.map((k) => fmt(num(k))).join(', ')}/s)`;
};

const contenders = [
	['retries (2 workers, batch_size ' + r.batch_size + ')', drain,
	 `calls scheduled up front; measured from switching execution on to the last result row; best of ${runs('drain_retries')}`],
	['per-commit ceiling (pgbench)', num('per_commit'),
	 `one job per transaction; ${sweep('per_commit_c', 'clients')}`],
	['batched ceiling (pgbench)', num('batched'),
	 `100 jobs per transaction, a subtransaction each; ${sweep('batched_c', 'clients')}`],
	['graphile-worker', num('graphile'),
	 `local queue of 500, batched completion; ${sweep('graphile_c', 'concurrency')}`],
	['pg-boss', num('pgboss'), `4 workers, batchSize 100, jobs of a batch run concurrently`],
];
const contenderTable = [
	'| contender | calls/s | how |',
	'|---|---:|---|',
	...contenders.map(([name, rate, how]) => `| ${name} | ${fmt(rate)} | ${how} |`),
].join('\n');

const latencyTable = [
	'| | p50 | p95 | p99 | max | samples |',
	'|---|---:|---:|---:|---:|---:|',
	...[['retries pick-up', 'latency'], ['graphile-worker pick-up', 'graphile_latency'],
		['retries due-time lateness', 'due'], ['retries retry-delay lateness', 'retry_delay'],
		['retries.wait() after a cancel\'s commit', 'wake'],
		['retries.wait() after a worker\'s success', 'wake_worker'],
		['chain: one link to the next', 'chain_link']]
		.map(([name, k]) => `| ${name} | ${ms(num(`${k}_p50_ms`))} | ${ms(num(`${k}_p95_ms`))} | ${ms(num(`${k}_p99_ms`))} | ${ms(num(`${k}_max_ms`))} | ${r[`${k}_samples`]} |`),
].join('\n');

const memory = Object.keys(r).filter((k) => k.startsWith('anon_before_')).map((k) => {
	const pid = k.replace('anon_before_', '');
	const mb = (key) => (num(key) / 1024).toFixed(1);
	return `| worker ${pid} | ${mb(`rss_before_${pid}`)} MB | ${mb(`rss_after_${pid}`)} MB | ${mb(`anon_before_${pid}`)} MB | ${mb(`anon_after_${pid}`)} MB |`;
});

const summary = `${held} of ${judged.length} targets hold`;
console.log(targetTable);
console.log();
console.log(contenderTable);
console.log();
console.log(summary);

const md = `# Benchmarks

${r.smoke === '1' ? '> **Smoke run** (small N): the numbers below only show that every step works.\n\n' : ''}Measured by \`bench/run\` on ${r.date}: ${r.machine_cores} cores
(${r.machine_cpu.replace(/_/g, ' ')}), ${r.machine_mem_gib} GiB, Linux ${r.machine_kernel},
PostgreSQL ${r.pg_version} with its default settings (fsync and
synchronous_commit on, shared_buffers 128 MB), Node.js ${r.node_version}.
Everything in one run, on one private cluster, one contender at a time.

**${summary}.**

![throughput and latency](benchmarks.png)

## Targets

Each target compares two things measured in the same run, so that the
noise of the machine cancels out.  Where a drain is compared with a
reference drain, the two run back to back, ${r.smoke === '1' ? 'a few' : 'three'} times
in turn, and the ratio is the median of the pairs' ratios (the figures
shown are that pair's): over the minutes of a step this machine's
throughput can drift by a third, which a ratio of two bests taken minutes
apart would report as a cost or a gain.

${targetTable}

## Throughput: draining ${fmt(n)} calls

The workload is the same for every contender: \`work(id bigint)\`, a SQL
function that inserts one row into a table with a primary key.  Every
contender must leave exactly ${fmt(n)} rows (the run fails otherwise).
Throughput is (rows − 1) / (last row's time − first row's time), except
for retries, which is measured from the moment execution is switched on,
so it includes waking up.

${contenderTable}

retries keeps a full history: each call also gets an attempt row, and its
state changes to \`succeeded\` in the same transaction as the function's
effects.  The peers in their fastest configuration complete jobs in a
separate transaction from the work (graphile-worker batches completions
after the task has committed), so they promise less: a crash between the
two runs the job again.

## Latency

Pick-up latency is the time from just before the COMMIT of the
transaction that scheduled the call (\`clock_timestamp()\` in its last
statement) to the first statement of the call's function, for calls
scheduled one at a time into an idle system.  graphile-worker runs with its
default configuration here (woken by LISTEN/NOTIFY, no local queue, which
its documentation says adds latency).  Due-time lateness is the start of the function minus the call's
\`run_at\`, for ${r.due_samples} calls due 100–500 ms after they were
scheduled.  Retry-delay lateness is the start of attempt n + 1 minus (the end
of attempt n plus the delay the formula chose), for calls of a policy
\`3 20ms 80ms\` that fail twice.

${latencyTable}

Scheduling ${fmt(n)} calls in one statement, best of ${runs('schedule_retries')};
graphile-worker's \`add_jobs\` in the same runs, best of ${runs('schedule_graphile')}.
Retry-heavy load (every call fails twice with \`RT000\`, 1 ms apart, then
succeeds; 3 attempts a call), finished calls, best of ${runs('retry_heavy')}.

## Scale and memory

With ${fmt(future)} calls scheduled for the next day, the busiest worker
used ${r.idle_cpu_ticks} clock ticks of CPU in 10 s while idle
(${r.idle_cpu_pct}% of a core), and drained ${fmt(n)} due calls beside them
at ${fmt(num('drain_scale'))}/s.  Making those ${fmt(future)} calls due and
draining them ran at ${fmt(num('drain_future'))}/s.

Worker memory before and after that drain (RSS counts the shared buffers a
worker has touched, which is not a leak; private memory is RssAnon):

| | RSS before | RSS after | private before | private after |
|---|---:|---:|---:|---:|
${memory.join('\n')}

## Recurring schedules

Schedules firing every second and every minute, side by side with pg_cron,
and 100,000 daily schedules beside ordinary calls:
[benchmarks-schedules.md](benchmarks-schedules.md), written by
\`bench/schedules\`, which \`bench/run\` runs after its own steps.

## Beside long maintenance jobs

A drain of calls beside a 30 s procedure and a \`VACUUM\` of a large
table run as a command, against the same drain alone and beside the same
\`VACUUM\` run by a client:
[benchmarks-maintenance.md](benchmarks-maintenance.md), written by
\`bench/maintenance\`, which \`bench/run\` runs after \`bench/schedules\`.

## Calls waiting on events

A drain beside 100,000 calls that wait on events (1.6), the workers' idle
CPU beside them, and how soon a call starts after the commit of the
\`retries.emit\` that releases it:
[benchmarks-events.md](benchmarks-events.md), written by
\`bench/events\`, which \`bench/run\` runs last. On the 2-core
machine of 2026-11-27 (5 rounds, medians): a drain of 20,000 calls ran at
50,320 calls/s beside the waiting calls and 49,297 alone (1.02, target
at least 0.9); the idle workers used 0.75 % of one core beside them
(0.55 % alone; target under 1 %); a call started 0.353 ms (p50; p99
1.333 ms) after the emit's COMMIT returned to the client, 0.521 ms (p99
1.570 ms) after the commit's own timestamp (1,000 trials beside the
waiting calls; target p50 within 1 ms).

## On a Citus cluster

Calls on a three-node Citus cluster (a coordinator and two worker nodes
on this machine), by where their data is, with each node's share of the
CPU: [benchmarks-citus.md](benchmarks-citus.md), written by
\`bench/citus\`, which needs Citus (\`scripts/citus\` builds it) and runs on
its own. On the 2-core machine of 2026-11-28 (20,000 calls each inserting
one row, medians of 3 rounds): made on the coordinator into a local table
43,209 calls/s; made there into a hash-distributed table 4,726 (0.11×);
made on the worker node that holds the rows' shards 22,899 (0.53×); made
on the coordinator with \`colocate_with\` (1.7), so that each is made on
and run by its shard's node, 22,315 (0.52×; 0.49× for one node's shards
alone), with the coordinator doing 0.0 % of the cluster's CPU work (54 %
for calls made on it without \`colocate_with\`).

## Changes measured side by side

What a change costs is measured against the code before it, in one run
(\`bench/compare\`, instruction counts under callgrind):
[benchmarks-containment.md](benchmarks-containment.md) for the
containment of 1.3 (one role per batch, the checks at each attempt);
[benchmarks-drain.md](benchmarks-drain.md) for where a worker's time goes
in a drain (\`BENCH_PROFILE\`, perf), share by share, and what each change
to the drain's cost did to it;
[benchmarks-contention.md](benchmarks-contention.md) for how long one
role's calls wait beside another role's long calls, flood of due calls and
long commands (\`bench/contention\`, p50 and p99), and the drain of the
trust changes of 1.7 (hooks as their owner, batches of one foreign
owner, extra workers).

A session's first \`retries.call\` is measured by \`BENCH_FIRST=50 bench/compare\`:
fifty fresh sessions, each making six calls one statement at a time, the
median of their first calls against the median of the others, and the
bound of 2 × warm + 2 ms. The first call read its function's policy with
one SQL statement that it parsed and planned first (two thirds of its
time, under perf); it now reads the three rows through their indexes
(\`current_policy_direct\`, \`names_own_key\`). On a loaded 2-core machine,
the code before: first 2.74 ms, warm 0.37 ms (4.69 / 0.38 in another
run, over the bound); after: first 1.41 ms, warm 0.10 ms (bound 2.20 ms).

## Reproduce

    bench/run            # as root or with sudo, about 20 minutes (and 15 for bench/schedules)

It installs what it needs (PostgreSQL 15, gnuplot-nox, Node.js if missing,
and graphile-worker and pg-boss from npm into \`bench/node_modules\`), builds
and installs the extension, starts a private cluster, runs every step and
rewrites this file and \`benchmarks.png\`.  \`bench/run --smoke\` runs the same
steps with N = 2,000 (CI runs it so that the benchmark cannot rot).
\`BENCH_N\` and \`BENCH_FUTURE\` change the sizes.
`;
fs.writeFileSync(path.join(outDir, 'benchmarks.md'), md);

fs.writeFileSync(path.join(outDir, 'throughput.dat'), contenders
	.map(([name, rate]) => `"${name.replace(/ \(.*/, '')}" ${Math.round(rate)}`).join('\n') + '\n');
fs.writeFileSync(path.join(outDir, 'latency.dat'),
	['p50', 'p95', 'p99'].map((p) =>
		`${p} ${num(`latency_${p}_ms`)} ${num(`graphile_latency_${p}_ms`)}`).join('\n') + '\n');
