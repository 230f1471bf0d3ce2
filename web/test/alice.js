// alice.js -- the role the load tests log in as, and her functions
//
// aliceSetup({ failEvery, policy, other }): SQL, run as a superuser, that
// makes the extension (if missing), role alice (password 'alice-pw') with
// her schema, and alice.work(int), which raises RT503 (retried) for one
// argument in 'failEvery' and returns it otherwise, annotated with
// 'policy'; with 'other', also alice.other(int), which always succeeds,
// annotated with the default policy.

'use strict';

function aliceSetup({ failEvery, policy, other = false }) {
	return `
CREATE EXTENSION IF NOT EXISTS retries;
CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
CREATE SCHEMA alice AUTHORIZATION alice;
SET ROLE alice;
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF n % ${Number(failEvery)} = 0 THEN
		RAISE EXCEPTION 'the API is down' USING ERRCODE = 'RT503';
	END IF;
	RETURN n;
END $$;
SELECT retries.annotate('alice.work(int)', policy => '${policy}');
${other ? `CREATE FUNCTION alice.other(n int) RETURNS int LANGUAGE sql AS $$SELECT n$$;
SELECT retries.annotate('alice.other(int)');` : ''}
RESET ROLE;
`;
}

module.exports = { aliceSetup };
