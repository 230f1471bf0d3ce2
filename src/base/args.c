/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Checking and converting the arguments of the SQL functions.
 *
 * Intervals become microseconds (refusing the ones with months, whose
 * length depends on the date), NULLs are refused by name, ids become
 * arrays, and a call that does not exist or is not the caller's gets one
 * error, whichever it is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/policy.h"

/*
 * args_call_not_found -- raise the error of a call that does not exist
 * or that the current role may not see: the same for both, so that the ids
 * of other roles' calls reveal nothing; 'argname' names the argument that
 * gave the id, if it is not the function's only one
 */
void
args_call_not_found(int64 id, const char *argname)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 argname ?
			 errmsg("%s: call " INT64_FORMAT " does not exist", argname, id) :
			 errmsg("call " INT64_FORMAT " does not exist", id),
			 errdetail("A role sees only the calls it scheduled, unless it is a superuser or a member of retries_admin.")));
}

/*
 * args_id_array -- n ids as an int8[] Datum
 */
Datum
args_id_array(const int64 *ids, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(ids[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * args_check_not_null -- raise an error naming the argument if it is NULL
 *
 * The SQL functions are not STRICT, so that leaving out a required value is
 * an error rather than a silent NULL result.
 */
void
args_check_not_null(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/*
 * args_portable_literals -- from now until AtEOXact_GUC(true, the level
 * returned), values are written as literals that read back as the same
 * values whatever the reading session's settings: every digit of a float,
 * dates in ISO, intervals in ISO 8601 (which no IntervalStyle reads with
 * another sign, as sql_standard reads a mixed-sign interval of the
 * postgres style)
 */
int
args_portable_literals(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("DateStyle", "ISO, MDY", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("IntervalStyle", "iso_8601", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * args_interval_to_usecs -- an interval as microseconds
 *
 * Months count as 30 days and days as 24 hours, as in PostgreSQL's own
 * interval comparisons.  Returns false if the result is negative or longer
 * than POLICY_MAX_DURATION, the longest delay a policy may use.
 */
bool
args_interval_to_usecs(const Interval *span, int64 *usecs)
{
	int64		days = (int64) span->month * DAYS_PER_MONTH + span->day;
	int64		result;

	/* |days| < 2^37, so this product cannot overflow */
	if (days > POLICY_MAX_DURATION / USECS_PER_DAY + 1 ||
		days < -(POLICY_MAX_DURATION / USECS_PER_DAY + 1))
		return false;
	result = days * USECS_PER_DAY;
	if (pg_add_s64_overflow(result, span->time, &result))
		return false;
	if (result < 0 || result > POLICY_MAX_DURATION)
		return false;
	*usecs = result;
	return true;
}

/*
 * args_interval_arg -- the interval argument 'argno' of a SQL function,
 * named 'argname', as microseconds, checked: zero or more (more than zero
 * if 'positive') and at most 3650 days (POLICY_MAX_DURATION); 22023 naming
 * it if not.  The argument must not be NULL.
 */
int64
args_interval_arg(FunctionCallInfo fcinfo, int argno, const char *argname,
				  bool positive)
{
	int64		usecs;

	if (!args_interval_to_usecs(PG_GETARG_INTERVAL_P(argno), &usecs) ||
		(positive && usecs == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %s and at most 3650 days, not \"%s\"", argname,
						positive ? "more than zero" : "zero or more",
						DatumGetCString(DirectFunctionCall1(interval_out,
															PG_GETARG_DATUM(argno))))));
	return usecs;
}

/*
 * args_interval_to_delay -- an interval as a delay, clamped to
 * 0 .. POLICY_MAX_DURATION
 *
 * For a delay that user code returns while a call runs (delay_fn's result),
 * where refusing it is not an option: a negative interval means no delay,
 * and one longer than the longest delay ('1000000 years') means the longest
 * delay, never a wrapped or zero one.  Months count as 30 days, as in
 * args_interval_to_usecs.  When the sum overflows int64 its sign is the
 * sign of the days part, which is then far larger than any time part.
 */
int64
args_interval_to_delay(const Interval *span)
{
	int64		days = (int64) span->month * DAYS_PER_MONTH + span->day;
	int64		usecs;

	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, span->time, &usecs))
		return days < 0 ? 0 : POLICY_MAX_DURATION;
	return Max(0, Min(usecs, POLICY_MAX_DURATION));
}

/*
 * args_usecs_to_interval -- microseconds as an interval of pure time
 *
 * Delays are stored as time only (no days or months), so they compare and
 * add exactly.
 */
Interval *
args_usecs_to_interval(int64 usecs)
{
	Interval   *span = palloc0(sizeof(Interval));

	span->time = usecs;
	return span;
}

/*
 * args_quotable -- the first 'len' bytes of 'text' as an error message may
 * quote them: whole up to QUOTE_MAX bytes, else their first whole
 * characters within it and "..." (a 1 MB policy or name put 1 MB into
 * the message and the server's log, per statement: the seventeenth
 * hostile review)
 */
char *
args_quotable(const char *text, int len)
{
	int			cut;

	if (len <= QUOTE_MAX)
		return pnstrdup(text, len);
	cut = pg_mbcliplen(text, len, QUOTE_MAX);
	return psprintf("%.*s...", cut, text);
}

/*
 * args_clip_len -- how many of the 'len' bytes of 'text', an error's text,
 * are kept: all of them if fewer than ERROR_TEXT_LEN, else the first whole
 * characters within ERROR_TEXT_LEN - 4, which "..." follows.  A role's
 * code raises texts of any size (a RAISE of a 100 MB message, an error of
 * PostgreSQL's quoting a whole input another role wrote): kept whole, such
 * a text went into every attempt's row, and the worker copied it nine
 * times over, past retries.max_worker_memory (the thirty-sixth hostile
 * review).
 */
int
args_clip_len(const char *text, int len)
{
	if (len < ERROR_TEXT_LEN)
		return len;
	return pg_mbcliplen(text, len, ERROR_TEXT_LEN - 4);
}

/*
 * args_clipped -- 'text' (palloc'd, or NULL) as args_clip_len keeps it:
 * itself if short enough, else a shorter copy, and 'text' freed
 */
char *
args_clipped(char *text)
{
	int			len;
	int			cut;
	char	   *clipped;

	if (text == NULL)
		return NULL;
	len = strlen(text);
	cut = args_clip_len(text, len);
	if (cut == len)
		return text;

	clipped = psprintf("%.*s...", cut, text);
	pfree(text);
	return clipped;
}

/*
 * Text that is not valid in the database's encoding.  A role's SQL can
 * make some (pg_stat_activity shows the queries of a database of another
 * encoding as they are, and jsonb_build_array() or a RAISE takes them as
 * they come); in the extension's tables, which hold every role's rows, one
 * such value kept every role's calls out of a restore, whose COPY checks
 * the encoding (the twenty-third hostile review, t/056).  What a role
 * passes in is refused (args_check_encoding, 22021); what a role's code
 * raised, or a command in another database reported, is kept with each
 * byte that begins no character as '?' (args_valid_text).
 */

/*
 * args_check_encoding -- raise 22021 if the 'len' bytes of 'text', which
 * 'what' names, are not valid in the database's encoding
 */
void
args_check_encoding(const char *text, int len, const char *what)
{
	if (pg_verifymbstr(text, len, true))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
			 errmsg("%s is not valid in the database's encoding, %s",
					what, GetDatabaseEncodingName()),
			 errdetail("The extension's tables hold every role's calls, and a restore of them checks every text."),
			 errhint("Pass text converted to the database's encoding, such as convert_from()'s.")));
}

/*
 * args_check_jsonb_encoding -- args_check_encoding() of every string and
 * key in a jsonb value
 */
void
args_check_jsonb_encoding(Jsonb *value, const char *what)
{
	JsonbIterator *it = JsonbIteratorInit(&value->root);
	JsonbValue	v;
	JsonbIteratorToken token;

	while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if ((token == WJB_KEY || token == WJB_VALUE || token == WJB_ELEM) &&
			v.type == jbvString)
			args_check_encoding(v.val.string.val, v.val.string.len, what);
	}
}

/*
 * args_valid_text -- str if it is valid in the database's encoding (or
 * NULL), else a copy in which each byte that begins no valid character is
 * '?'
 */
const char *
args_valid_text(const char *str)
{
	int			len;
	char	   *copy;
	char	   *p;

	if (str == NULL)
		return NULL;
	len = strlen(str);
	if (pg_verifymbstr(str, len, true))
		return str;
	copy = pstrdup(str);
	for (p = copy; *p != '\0';)
	{
		int			l = pg_encoding_verifymbchar(GetDatabaseEncoding(), p, len - (p - copy));

		if (l <= 0)
		{
			*p++ = '?';
			continue;
		}
		p += l;
	}
	return copy;
}
