-- recurring schedules: the times they fire (retries.next_runs), with
-- daylight-saving shifts of real zones.  Instants are shown in UTC and in
-- the zone's wall-clock time.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- cron: every 15 minutes, strictly after "after"
SELECT * FROM retries.next_runs('*/15 * * * *', 'UTC', '2026-11-24 10:07:30+00', 3);
SELECT * FROM retries.next_runs('0 0 1 1 *', 'UTC', '2026-12-31 23:59:59+00', 1);
-- day of month and day of week both given: either matches (the 13th, or a Friday)
SELECT t, to_char(t, 'Dy DD') FROM retries.next_runs('0 0 13 * fri', 'UTC', '2026-11-24', 4) t;
-- one of them '*': both must match (Mondays that are the 1st, 11th, 21st or 31st)
SELECT t, to_char(t, 'Dy DD') FROM retries.next_runs('0 0 */10 * mon', 'UTC', '2026-01-01', 3) t;
SELECT * FROM retries.next_runs('@daily', 'UTC', '2026-11-24 10:00+00', 2);
SELECT * FROM retries.next_runs('@weekly', 'UTC', '2026-11-24 10:00+00', 2);
-- n = 0, and a cron expression that only fires once in years
SELECT count(*) FROM retries.next_runs('* * * * *', 'UTC', now(), 0);
SELECT * FROM retries.next_runs('0 0 29 feb *', 'UTC', '2096-03-01', 2);
-- the rarest: 29 February that is a Sunday ('*/7' is a step over '*': both
-- must match), 40 years apart around 2100, which is no leap year
SELECT t, to_char(t, 'Dy DD') FROM retries.next_runs('0 0 29 2 */7', 'UTC', '2060-03-01', 3) t;
-- L (or pg_cron's $): the last day of the month, leap years included
SELECT t, to_char(t AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD HH24:MI Dy') AS berlin
  FROM retries.next_runs('30 23 L * *', 'Europe/Berlin', '2028-01-15', 3) t;
SELECT * FROM retries.next_runs('0 0 1,15,$ 2 *', 'UTC', '2100-01-01', 4);
-- with a day of week: the last day or a Friday; the last day if a Sunday
SELECT t, to_char(t, 'Dy DD') FROM retries.next_runs('0 0 L * fri', 'UTC', '2026-11-24', 3) t;
SELECT t, to_char(t, 'Dy DD') FROM retries.next_runs('0 0 L * */7', 'UTC', '2026-11-24', 2) t;

-- intervals: a fixed rate from "after", whatever the zone does
SELECT * FROM retries.next_runs('30s', 'UTC', '2026-11-24 10:00:00+00', 3);
SELECT * FROM retries.next_runs('1h30m', 'America/New_York', '2026-03-08 05:00+00', 3);
SELECT * FROM retries.next_runs('5 minutes', 'UTC', '2026-11-24 10:00:00+00', 2);
SELECT * FROM retries.next_runs('1 day', 'Europe/London', '2026-03-28 12:00+00', 2);

-- America/New_York, spring forward (2026-03-08 02:00 EST -> 03:00 EDT):
-- 02:30 does not happen that night and fires at the shift, once
SELECT t AS utc, t AT TIME ZONE 'America/New_York' AS wall
  FROM retries.next_runs('30 2 * * *', 'America/New_York', '2026-03-06 12:00+00', 4) t;
SELECT t AS utc, t AT TIME ZONE 'America/New_York' AS wall
  FROM retries.next_runs('*/30 * * * *', 'America/New_York', '2026-03-08 06:00+00', 4) t;
-- fall back (2026-11-01 02:00 EDT -> 01:00 EST): 01:30 happens twice and
-- fires at the first; every 30 minutes skips the repeated hour
SELECT t AS utc, t AT TIME ZONE 'America/New_York' AS wall
  FROM retries.next_runs('30 1 * * *', 'America/New_York', '2026-10-30 12:00+00', 3) t;
SELECT t AS utc, t AT TIME ZONE 'America/New_York' AS wall
  FROM retries.next_runs('*/30 * * * *', 'America/New_York', '2026-11-01 04:10+00', 5) t;

-- Europe/London (2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT)
SELECT t AS utc, t AT TIME ZONE 'Europe/London' AS wall
  FROM retries.next_runs('30 1 * * *', 'Europe/London', '2026-03-27 12:00+00', 3) t;
SELECT t AS utc, t AT TIME ZONE 'Europe/London' AS wall
  FROM retries.next_runs('30 1 * * *', 'Europe/London', '2026-10-24 12:00+00', 3) t;

-- Australia/Lord_Howe shifts by half an hour (2026-10-04 02:00 -> 02:30;
-- 2026-04-05 02:00 -> 01:30)
SELECT t AS utc, t AT TIME ZONE 'Australia/Lord_Howe' AS wall
  FROM retries.next_runs('15 2 * * *', 'Australia/Lord_Howe', '2026-10-02 12:00+00', 3) t;
SELECT t AS utc, t AT TIME ZONE 'Australia/Lord_Howe' AS wall
  FROM retries.next_runs('45 1 * * *', 'Australia/Lord_Howe', '2026-04-03 12:00+00', 3) t;

-- Pacific/Apia skipped all of 30 December 2011: its noon fires once, at
-- the shift (midnight between the 29th and the 31st)
SELECT t AS utc, t AT TIME ZONE 'Pacific/Apia' AS wall
  FROM retries.next_runs('0 12 * * *', 'Pacific/Apia', '2011-12-28 00:00+00', 4) t;

-- POSIX zones as far from UTC as PostgreSQL accepts (167:59 either
-- way, in standard and in summer time), against a minute-by-minute search
-- by PostgreSQL's own conversion: the first 5 runs after each start are
-- the first 5 minutes whose wall-clock time in the zone matches (1.7 fired
-- every 42 hours for hourly in <X>-41, weekly for every 5 minutes in
-- UTC-167: it searched 40 hours either way and fell back to UTC)
SELECT count(*) AS cases,
	   string_agg(zone || ' ' || expr || ' ' || after, '; ') FILTER (WHERE NOT as_searched) AS differ
  FROM (
SELECT zone, expr, after,
	   (SELECT array_agg(t ORDER BY t) FROM retries.next_runs(expr, zone, after, 5) t)
	   = (SELECT array_agg(m ORDER BY m)
			FROM (SELECT m FROM generate_series(date_trunc('minute', after) + interval '1 minute',
												after + interval '6 days', interval '1 minute') m
				   WHERE CASE expr
						 WHEN '0 * * * *' THEN extract(minute FROM m AT TIME ZONE zone) = 0
						 WHEN '*/5 * * * *' THEN extract(minute FROM m AT TIME ZONE zone)::int % 5 = 0
						 ELSE extract(hour FROM m AT TIME ZONE zone) = 2
							  AND extract(minute FROM m AT TIME ZONE zone) = 30 END
				   ORDER BY m LIMIT 5) o) AS as_searched
  FROM (VALUES ('UTC-167'), ('UTC+167'), ('<X>-41'), ('<X>+100:30'),
			   ('<X>-167:59'), ('<X>-150<Y>-151,M3.5.0,M10.5.0')) z(zone),
	   (VALUES ('0 * * * *'), ('*/5 * * * *'), ('30 2 * * *')) e(expr),
	   (VALUES ('2026-11-29 10:07:30+00'::timestamptz), ('2027-06-30 23:59:00+00')) a(after)
) cases;

-- every instant is later than the one before, through a year of shifts
SELECT bool_and(t > prev) AS increasing, count(*)
  FROM (SELECT t, lag(t, 1, '-infinity') OVER (ORDER BY ord) AS prev
		  FROM retries.next_runs('*/20 0-3 * * *', 'America/New_York', '2026-01-01', 10000)
			   WITH ORDINALITY AS r(t, ord)) s;

-- bad input: 22023, naming the bad part
CALL test.try($$SELECT retries.next_runs('61 * * * *')$$);
CALL test.try($$SELECT retries.next_runs('* * * * * *')$$);
CALL test.try($$SELECT retries.next_runs('* * * smarch *')$$);
CALL test.try($$SELECT retries.next_runs('0 0 30 feb *')$$);
CALL test.try($$SELECT retries.next_runs('0 0 L-3 * *')$$);
CALL test.try($$SELECT retries.next_runs('0 0 LW * *')$$);
CALL test.try($$SELECT retries.next_runs('*/0 * * * *')$$);
CALL test.try($$SELECT retries.next_runs('@reboot')$$);
CALL test.try($$SELECT retries.next_runs('500ms')$$);
CALL test.try($$SELECT retries.next_runs('1 month')$$);
CALL test.try($$SELECT retries.next_runs('soon')$$);
CALL test.try($$SELECT retries.next_runs('0 * * * *', 'Mars/Olympus_Mons')$$);
CALL test.try($$SELECT retries.next_runs('0 * * * *', n => -1)$$);
CALL test.try($$SELECT retries.next_runs('0 * * * *', n => 10001)$$);
CALL test.try($$SELECT retries.next_runs('0 * * * *', after => 'infinity')$$);
-- '@reboot' (1.7) fires at each start of the server, at no time
SELECT (SELECT count(*) FROM retries.next_runs('@reboot')) + (SELECT count(*) FROM retries.next_runs(' @REBOOT ')) AS at_times;
CALL test.try($$SELECT retries.next_runs('@reboots')$$);
