--
-- policy_grammar: the '[count] min [max]' policy string
--
CALL test.reset();
CREATE FUNCTION g() RETURNS void LANGUAGE sql AS '';

-- parse(p): annotate g() with policy p and show what was stored
CREATE FUNCTION test.parse(p text)
RETURNS TABLE (max_attempts int, min_delay interval, max_delay interval, policy text)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.annotate('g()', p);
	RETURN QUERY SELECT r.max_attempts, r.min_delay, r.max_delay, r.policy
				   FROM retries.policies r WHERE r.fn = 'g()'::regprocedure;
END
$$;

-- every form: fixed delay, exponential backoff, with and without a count
-- (the count is of retries, so max_attempts is one more)
SELECT input, r.*
  FROM unnest(ARRAY[
		'5s',				-- retry every 5 s, forever
		'5s 10m',			-- 5 s, 10 s, 20 s, ... capped at 10 min, forever
		'10 5s',			-- 10 retries, 5 s apart
		'10 5s 10m',		-- 10 retries with backoff
		'1 250ms',			-- one retry
		'1h30m',			-- units combine, largest first
		'1d2h3m4s5ms',
		'1.5s 2.25m',		-- decimal fractions
		'0.001ms',			-- one microsecond
		'3650d',			-- the longest delay
		'  3   1s   1h  ',	-- extra white space
		E'3\t1s\t1h',		-- tabs
		'5s 5s',			-- max equal to min
		'999999999 1s'		-- the most retries
	   ]) AS input,
	   LATERAL test.parse(input) r;

-- malformed strings: each is refused with a message that names the bad part
DO $$
DECLARE
	p text;
BEGIN
	FOREACH p IN ARRAY ARRAY[
		'',					-- empty
		'   ',				-- only white space
		'10',				-- a count but no delay
		'5',
		'5x',				-- unknown unit
		'5S',				-- units are lower case (M would be ambiguous)
		'5 s',				-- unit apart from its number
		's',				-- unit without a number
		'5',
		'-1 5s',			-- negative count
		'0 5s',				-- zero count
		'3.5 1s',			-- fractional count
		'1000000000 1s',	-- count too large
		'99999999999999999999 1s',
		'0s',				-- zero delay
		'-5s',				-- negative delay
		'10s 5s',			-- max below min
		'1s 2s 3s',			-- too many parts
		'10 20 5s',			-- two counts
		'30m1h',			-- units out of order
		'1h1h',				-- unit repeated
		'5ms5s',
		'1.s',				-- malformed numbers
		'.5s',
		'1..5s',
		'1e3s',
		'+5s',
		'5s,10m',			-- comma
		'3651d',			-- longer than the longest delay
		'99999999999999999999s',
		'1000000 years',
		'5 seconds',
		'NaN'
	]
	LOOP
		CALL test.try(format('SELECT retries.annotate(%L, %L)', 'g()', p));
	END LOOP;
END
$$;

-- nothing was stored by the refused strings: g() keeps its last policy
SELECT policy FROM retries.policies WHERE fn = 'g()'::regprocedure;
SELECT count(*) AS versions FROM retries.policy_data;

-- without a string, retries.default_policy applies
SELECT retries.annotate('g()');
SELECT policy FROM retries.policies WHERE fn = 'g()'::regprocedure;
SET retries.default_policy = '3 2s';
SELECT retries.annotate('g()');
SELECT policy FROM retries.policies WHERE fn = 'g()'::regprocedure;
-- the setting itself is checked
SET retries.default_policy = '3 2x';
RESET retries.default_policy;

-- named arguments override the parts of the string
SELECT retries.annotate('g()', '10 5s 10m', max_attempts => 3);
SELECT max_attempts, min_delay, max_delay, policy FROM retries.policies;
SELECT retries.annotate('g()', '10 5s', max_delay => '1 hour');
SELECT max_attempts, min_delay, max_delay, policy FROM retries.policies;
SELECT retries.annotate('g()', '10 5s 10m', min_delay => '1 minute');
SELECT max_attempts, min_delay, max_delay, policy FROM retries.policies;
-- max_attempts => 1 never retries; the policy string shows a count of 0
SELECT retries.annotate('g()', '5s', max_attempts => 1);
SELECT max_attempts, policy FROM retries.policies;
-- an override that makes max < min is refused too
CALL test.try($$SELECT retries.annotate('g()', '10 5s 10m', min_delay => '1 hour')$$);

-- format_policy writes what annotate reads
SELECT retries.format_policy(11, '5 seconds', '10 minutes'),
	   retries.format_policy(NULL, '1 day 02:00:00.0005', NULL),
	   retries.format_policy(1, '1 month', NULL);

DROP FUNCTION g();
DROP FUNCTION test.parse(text);
