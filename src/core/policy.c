/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  The retry-policy grammar ('[count] min [max]'), durations, the delay
 *	  formula, jitter and retry_on matching.
 *
 * This file is plain C99 and uses only the C standard library: no server
 * headers, no allocation and no global mutable state.  The extension links
 * it, and test/policy_test.c builds it on its own.  Every function must be
 * safe on any input, however malformed or large, because a crash here would
 * take a backend or a worker down with it: all arithmetic is checked or
 * clamped, and every buffer write is bounded.
 *
 * Parsing never uses locale-dependent functions (strtod, isdigit on plain
 * char, ...): the grammar is ASCII and the digits are read by hand, which is
 * also what makes the rounding of fractions exact.
 *
 * Error messages follow PostgreSQL's style: the message is lower case without
 * a final period and quotes the offending text; the hint, when there is one,
 * is a full sentence.
 *
 * IDENTIFICATION
 *	  src/core/policy.c
 *
 *-------------------------------------------------------------------------
 */
#include "core/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Most bytes of a token quoted in a message, before "..." is appended */
#define QUOTE_MAX	40

/* Size of a buffer that holds a quoted token (policy.h says it too) */
#define QUOTED_LEN	POLICY_QUOTED_LEN

/* A token of a policy string: str[0..len), not NUL-terminated */
typedef struct Token
{
	const char *str;
	size_t		len;
} Token;

/* Most tokens policy_parse looks at: count, min, max and one too many */
#define MAX_TOKENS	4

/* A duration unit; the table is in the order units must be written in */
typedef struct DurationUnit
{
	const char *name;
	int64_t		usecs;
} DurationUnit;

static const DurationUnit duration_units[] = {
	{"d", POLICY_USECS_PER_DAY},
	{"h", POLICY_USECS_PER_HOUR},
	{"m", POLICY_USECS_PER_MIN},
	{"s", POLICY_USECS_PER_SEC},
	{"ms", POLICY_USECS_PER_MS},
};

#define NUM_DURATION_UNITS \
	((int) (sizeof(duration_units) / sizeof(duration_units[0])))

/* The hint given for anything that is not a well-formed duration */
#define DURATION_HINT \
	"A duration is a number and a unit (d, h, m, s or ms), largest unit first, as in \"1h30m\" or \"250ms\"."

/* Text for a jitter kind, indexed by PolicyJitter */
static const char *const jitter_names[] = {"none", "full", "equal"};


/*
 * policy_set_error
 *		Fill err's message from a format and clear its hint.
 *
 * Every error path goes through here so that a NULL err (a caller that only
 * wants a yes or no) is handled in one place.
 */
void
policy_set_error(PolicyError *err, const char *fmt,...)
{
	va_list		args;

	if (err == NULL)
		return;
	va_start(args, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, args);
	va_end(args);
	err->hint[0] = '\0';
}

/*
 * policy_set_hint
 *		Fill err's hint from a format; call after set_error.
 */
void
policy_set_hint(PolicyError *err, const char *fmt,...)
{
	va_list		args;

	if (err == NULL)
		return;
	va_start(args, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, args);
	va_end(args);
}

/*
 * clear_error
 *		Empty both fields of err, so that a success leaves no stale text.
 */
static void
clear_error(PolicyError *err)
{
	if (err == NULL)
		return;
	err->message[0] = '\0';
	err->hint[0] = '\0';
}

/*
 * policy_quote
 *		Write str[0..len) into dst (QUOTED_LEN bytes) between double quotes,
 *		for use in a message, and return dst.
 *
 * Control characters are shown as \xNN so that a message never carries a
 * raw newline or NUL.  Text longer than QUOTE_MAX bytes is cut and marked
 * with "..."; the cut never falls inside a run of non-ASCII bytes, so a
 * multibyte character (in UTF-8 or any other server encoding) is never
 * split into an invalid byte sequence.
 */
const char *
policy_quote(char *dst, const char *str, size_t len)
{
	static const char hexdigits[] = "0123456789abcdef";
	size_t		out = 0;
	size_t		i;

	dst[out++] = '"';
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) str[i];
		bool		control = (c < 0x20 || c == 0x7f);
		size_t		need = control ? 4 : 1;

		if (out - 1 + need > QUOTE_MAX)
		{
			if (c >= 0x80)
			{
				while (out > 1 && (unsigned char) dst[out - 1] >= 0x80)
					out--;
			}
			memcpy(dst + out, "...", 3);
			out += 3;
			break;
		}
		if (control)
		{
			dst[out++] = '\\';
			dst[out++] = 'x';
			dst[out++] = hexdigits[c >> 4];
			dst[out++] = hexdigits[c & 0x0f];
		}
		else
			dst[out++] = (char) c;
	}
	dst[out++] = '"';
	dst[out] = '\0';
	return dst;
}

/*
 * is_space
 *		Is c white space separating the parts of a policy?
 *
 * Plain comparisons rather than isspace(), which depends on the locale and
 * is undefined for negative char values.
 */
static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
		c == '\f' || c == '\v';
}

/*
 * is_digit
 *		Is c an ASCII decimal digit?
 */
static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * is_unit_char
 *		Can c be part of a unit name, as far as error reporting goes?
 *
 * Units are lower-case ASCII letters, but a run of any letters (and of
 * non-ASCII bytes, as in "5µs") is taken as one would-be unit so that the
 * error can quote it whole: unknown unit "µs" rather than a byte.
 */
static bool
is_unit_char(char c)
{
	unsigned char uc = (unsigned char) c;

	return (uc >= 'a' && uc <= 'z') || (uc >= 'A' && uc <= 'Z') || uc >= 0x80;
}

/*
 * to_lower_ascii
 *		Lower-case an ASCII letter; leave every other byte alone.
 */
static char
to_lower_ascii(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
}

/*
 * lookup_unit
 *		Index in duration_units of the unit named str[0..len), or -1.
 *
 * With ignore_case the match is case-insensitive; that is only used to
 * recognize "5S" or "5MS" and say that units are lower case.
 */
static int
lookup_unit(const char *str, size_t len, bool ignore_case)
{
	int			i;

	for (i = 0; i < NUM_DURATION_UNITS; i++)
	{
		const char *name = duration_units[i].name;
		size_t		j;

		if (strlen(name) != len)
			continue;
		for (j = 0; j < len; j++)
		{
			char		c = ignore_case ? to_lower_ascii(str[j]) : str[j];

			if (c != name[j])
				break;
		}
		if (j == len)
			return i;
	}
	return -1;
}

/*
 * fraction_usecs
 *		Round unit * 0.d1d2...dn to the nearest microsecond, exactly.
 *
 * The digits are multiplied by unit from the right, as on paper.  The carry
 * out of the leftmost digit is the whole number of microseconds, and the
 * digit written at that position is the first decimal of what is left, which
 * decides the rounding (halves round up).  Each carry stays below unit, so
 * nothing overflows however many digits there are, and no precision is lost
 * as it would be in floating point.
 */
static int64_t
fraction_usecs(const char *digits, size_t ndigits, int64_t unit)
{
	int64_t		carry = 0;
	int			first = 0;
	size_t		i = ndigits;

	while (i > 0)
	{
		int64_t		product;

		i--;
		product = unit * (digits[i] - '0') + carry;
		first = (int) (product % 10);
		carry = product / 10;
	}
	return carry + (first >= 5 ? 1 : 0);
}

/*
 * A part of a duration, such as "1.5s" in "1m1.5s": the number is
 * str[start..num_end), the unit str[num_end..unit_end), and unit its index
 * in duration_units (-1 if it has none)
 */
typedef struct DurationPart
{
	size_t		start;
	size_t		num_end;
	size_t		unit_end;
	int			unit;
} DurationPart;

/*
 * unit_run_end
 *		End of the run of unit characters (is_unit_char) at str[pos..len).
 */
static size_t
unit_run_end(const char *str, size_t len, size_t pos)
{
	while (pos < len && is_unit_char(str[pos]))
		pos++;
	return pos;
}

/*
 * check_duration_sign
 *		Refuse a duration that starts with a sign before a number; qdur is
 *		the whole duration, quoted.
 */
static bool
check_duration_sign(const char *str, size_t len, const char *qdur,
					PolicyError *err)
{
	if ((str[0] != '-' && str[0] != '+') || len <= 1 ||
		(!is_digit(str[1]) && str[1] != '.'))
		return true;

	if (str[0] == '-')
		policy_set_error(err, "duration %s is negative", qdur);
	else
		policy_set_error(err, "sign \"+\" is not allowed in duration %s", qdur);
	policy_set_hint(err, "Write durations without a sign, as in \"5s\".");
	return false;
}

/*
 * unexpected_char_error
 *		Report the character str[pos] as out of place in duration qdur;
 *		returns false.
 */
static bool
unexpected_char_error(const char *str, size_t pos, const char *qdur,
					  PolicyError *err)
{
	char		qchar[QUOTED_LEN];

	policy_set_error(err, "unexpected character %s in duration %s",
					 policy_quote(qchar, str + pos, 1), qdur);
	if (str[pos] == ',' || str[pos] == ';')
		policy_set_hint(err, "Separate the parts of a policy with white space, as in \"5s 10m\".");
	else
		policy_set_hint(err, "%s", DURATION_HINT);
	return false;
}

/*
 * part_start_error
 *		Report a part of duration qdur that does not start with a number but
 *		with str[pos]; returns false.
 */
static bool
part_start_error(const char *str, size_t len, size_t pos, const char *qdur,
				 PolicyError *err)
{
	char		qunit[QUOTED_LEN];
	size_t		unit_end;

	if (!is_unit_char(str[pos]))
		return unexpected_char_error(str, pos, qdur, err);

	/* only possible at the start: units end only at a non-letter */
	unit_end = unit_run_end(str, len, pos);
	if (lookup_unit(str + pos, unit_end - pos, true) >= 0)
		policy_set_error(err, "missing number before unit %s in duration %s",
						 policy_quote(qunit, str + pos, unit_end - pos), qdur);
	else
		policy_set_error(err, "duration %s does not start with a number",
						 qdur);
	policy_set_hint(err, "%s", DURATION_HINT);
	return false;
}

/*
 * parse_number
 *		Find the end of the number at str[start..len) into *num_end, and
 *		check that it is digits with an optional fraction.
 *
 * The number is a maximal run of digits and points, checked after, so that
 * a malformed one is quoted whole.
 */
static bool
parse_number(const char *str, size_t len, size_t start, const char *qdur,
			 size_t *num_end, PolicyError *err)
{
	size_t		end = start;
	size_t		ndots = 0;
	char		qnum[QUOTED_LEN];

	while (end < len && (is_digit(str[end]) || str[end] == '.'))
	{
		if (str[end] == '.')
			ndots++;
		end++;
	}
	*num_end = end;
	if (str[start] != '.' && ndots <= 1 && str[end - 1] != '.')
		return true;

	policy_set_error(err, "invalid number %s in duration %s",
					 policy_quote(qnum, str + start, end - start), qdur);
	if (str[start] == '.')
		policy_set_hint(err, "Write a digit before the decimal point, as in \"0.5s\".");
	else if (ndots > 1)
		policy_set_hint(err, "A number has at most one decimal point, as in \"1.5s\".");
	else
		policy_set_hint(err, "Write digits after the decimal point, as in \"1.5s\", or leave the point out.");
	return false;
}

/*
 * missing_unit_error
 *		Report the number of a part of duration qdur that no unit follows;
 *		returns false.
 */
static bool
missing_unit_error(const char *str, size_t len, const DurationPart *part,
				   const char *qdur, PolicyError *err)
{
	char		qnum[QUOTED_LEN];

	if (part->num_end < len)
		return unexpected_char_error(str, part->num_end, qdur, err);

	if (part->start == 0)
		policy_set_error(err, "missing unit in duration %s", qdur);
	else
		policy_set_error(err, "missing unit after %s in duration %s",
						 policy_quote(qnum, str + part->start,
									  part->num_end - part->start),
						 qdur);
	policy_set_hint(err, "Add a unit (d, h, m, s or ms) to the number, as in \"5s\".");
	return false;
}

/*
 * check_unit
 *		Check the unit of a part of duration qdur: a known one, smaller than
 *		last_unit, the unit of the part before (-1 for none).
 */
static bool
check_unit(const char *str, const DurationPart *part, int last_unit,
		   const char *qdur, PolicyError *err)
{
	const char *name = str + part->num_end;
	size_t		len = part->unit_end - part->num_end;
	char		qunit[QUOTED_LEN];
	char		qlast[QUOTED_LEN];

	policy_quote(qunit, name, len);
	if (part->unit < 0)
	{
		policy_set_error(err, "unknown unit %s in duration %s", qunit, qdur);
		if (lookup_unit(name, len, true) >= 0)
			policy_set_hint(err, "Write units in lower case (d, h, m, s or ms); upper case is refused because \"M\" could be taken for months.");
		else
			policy_set_hint(err, "Use one of the units d, h, m, s and ms, as in \"1h30m\" or \"250ms\".");
		return false;
	}
	if (part->unit == last_unit)
	{
		policy_set_error(err, "unit %s repeated in duration %s", qunit, qdur);
		policy_set_hint(err, "Use each unit at most once, largest first, as in \"1h30m\".");
		return false;
	}
	if (part->unit < last_unit)
	{
		policy_set_error(err, "units out of order in duration %s: %s follows %s",
						 qdur, qunit,
						 policy_quote(qlast, duration_units[last_unit].name,
									  strlen(duration_units[last_unit].name)));
		policy_set_hint(err, "Write units from largest to smallest (d, h, m, s, ms), as in \"1h30m\".");
		return false;
	}
	return true;
}

/*
 * parse_duration_part
 *		Read the part of duration qdur that starts at str[pos] into *part,
 *		checking its syntax and that its unit is smaller than last_unit (-1
 *		for none), but not its value.
 */
static bool
parse_duration_part(const char *str, size_t len, size_t pos, int last_unit,
					const char *qdur, DurationPart *part, PolicyError *err)
{
	part->start = pos;
	part->num_end = pos;
	part->unit_end = pos;
	part->unit = -1;
	if (!is_digit(str[pos]) && str[pos] != '.')
		return part_start_error(str, len, pos, qdur, err);
	if (!parse_number(str, len, pos, qdur, &part->num_end, err))
		return false;

	/* The unit: a maximal run of letters */
	part->unit_end = unit_run_end(str, len, part->num_end);
	if (part->unit_end == part->num_end)
		return missing_unit_error(str, len, part, qdur, err);
	part->unit = lookup_unit(str + part->num_end,
							 part->unit_end - part->num_end, false);
	return check_unit(str, part, last_unit, qdur, err);
}

/*
 * integer_value
 *		The value of the digits str[start..end), or some value above
 *		POLICY_MAX_DURATION if it is larger.
 *
 * Accumulating stops as soon as the value passes the limit, which keeps it
 * far from overflowing however many digits there are.
 */
static int64_t
integer_value(const char *str, size_t start, size_t end)
{
	int64_t		value = 0;
	size_t		i;

	for (i = start; i < end; i++)
	{
		value = value * 10 + (str[i] - '0');
		if (value > POLICY_MAX_DURATION)
			break;
	}
	return value;
}

/*
 * add_part_value
 *		Add the value of a well-formed part to *total, unless *too_large;
 *		set *too_large instead when the total would pass POLICY_MAX_DURATION.
 */
static void
add_part_value(const char *str, const DurationPart *part, int64_t * total,
			   bool *too_large)
{
	int64_t		usecs = duration_units[part->unit].usecs;
	size_t		int_end = part->start;
	int64_t		whole;

	if (*too_large)
		return;
	while (int_end < part->num_end && str[int_end] != '.')
		int_end++;
	whole = integer_value(str, part->start, int_end);
	if (whole > POLICY_MAX_DURATION / usecs)
	{
		*too_large = true;
		return;
	}

	/* each term is at most POLICY_MAX_DURATION + usecs */
	*total += whole * usecs;
	if (int_end < part->num_end)
		*total += fraction_usecs(str + int_end + 1,
								 part->num_end - int_end - 1, usecs);
	if (*total > POLICY_MAX_DURATION)
		*too_large = true;
}

/*
 * too_large_error
 *		Report duration qdur as above POLICY_MAX_DURATION; returns false.
 */
static bool
too_large_error(const char *qdur, PolicyError *err)
{
	char		limit[POLICY_FORMAT_LEN];

	policy_format_duration(POLICY_MAX_DURATION, limit, sizeof(limit));
	policy_set_error(err, "duration %s exceeds the maximum of %s", qdur, limit);
	policy_set_hint(err, "Durations can be at most %s, about ten years.", limit);
	return false;
}

/*
 * policy_parse_duration
 *		Parse a duration such as "5s", "1h30m", "1.5s" or "250ms" into
 *		microseconds.
 *
 * A duration is one or more parts, each a number and a unit, with the units
 * in descending order (d, h, m, s, ms) and each used at most once.  A number
 * is digits with an optional fraction ("1.5"; not "1." or ".5"); each
 * number's fraction is rounded to the nearest microsecond, halves up.
 * Nothing else is accepted: no sign, exponent, white space or upper-case
 * unit, because a policy string should read the same to every user.  Values
 * above POLICY_MAX_DURATION are an error, found without overflow however
 * long the digit strings are.
 */
bool
policy_parse_duration(const char *str, size_t len, int64_t * result,
					  PolicyError *err)
{
	size_t		pos = 0;
	int			last_unit = -1;
	int64_t		total = 0;
	bool		too_large = false;
	char		qdur[QUOTED_LEN];

	clear_error(err);
	if (str == NULL || len == 0)
	{
		policy_set_error(err, "duration is empty");
		policy_set_hint(err, "Write a duration such as \"5s\", \"250ms\" or \"1h30m\".");
		return false;
	}
	policy_quote(qdur, str, len);
	if (!check_duration_sign(str, len, qdur, err))
		return false;

	/*
	 * Part by part.  Once the value is known to be too large we only go on
	 * checking the syntax, so that a typo later in the text is reported
	 * first.
	 */
	while (pos < len)
	{
		DurationPart part;

		if (!parse_duration_part(str, len, pos, last_unit, qdur, &part, err))
			return false;
		last_unit = part.unit;
		add_part_value(str, &part, &total, &too_large);
		pos = part.unit_end;
	}
	if (too_large)
		return too_large_error(qdur, err);

	if (result != NULL)
		*result = total;
	return true;
}

/*
 * is_number_token
 *		Does the token look like a number with no unit: an optional '-',
 *		then digits and points only, at least one digit?
 *
 * With integer_only, no points are allowed either.  This is how
 * policy_parse tells a count (or a delay missing its unit) from a duration.
 */
static bool
is_number_token(const Token *tok, bool integer_only)
{
	size_t		i = 0;
	bool		digits = false;

	if (tok->len > 0 && tok->str[0] == '-')
		i++;
	for (; i < tok->len; i++)
	{
		if (is_digit(tok->str[i]))
			digits = true;
		else if (tok->str[i] != '.' || integer_only)
			return false;
	}
	return digits;
}

/*
 * check_split_unit
 *		Report a number whose unit was separated from it by white space, as
 *		in "5 s", when tokens[i] is a bare number and tokens[i + 1] a unit.
 *
 * Without this, "5 s" would read as a count followed by a malformed delay,
 * and the message would miss the real mistake.
 */
static bool
check_split_unit(const Token *tokens, int ntokens, int i, PolicyError *err)
{
	char		qnum[QUOTED_LEN];
	char		qunit[QUOTED_LEN];

	if (i + 1 >= ntokens || !is_number_token(&tokens[i], false) ||
		lookup_unit(tokens[i + 1].str, tokens[i + 1].len, true) < 0)
		return true;

	policy_set_error(err, "unit %s is separated from its number %s by white space",
					 policy_quote(qunit, tokens[i + 1].str, tokens[i + 1].len),
					 policy_quote(qnum, tokens[i].str, tokens[i].len));
	policy_set_hint(err, "Write a number and its unit together, as in \"5s\".");
	return false;
}

/*
 * parse_count
 *		Parse the count token of a policy: a whole number of retries in
 *		1 .. POLICY_MAX_ATTEMPTS - 1.
 */
static bool
parse_count(const Token *tok, int32_t *count, PolicyError *err)
{
	char		qtok[QUOTED_LEN];
	bool		negative = (tok->str[0] == '-');
	int64_t		value = 0;
	size_t		i;

	policy_quote(qtok, tok->str, tok->len);
	if (!is_number_token(tok, true))
	{
		policy_set_error(err, "count %s is not a whole number", qtok);
		policy_set_hint(err, "The count is the number of retries, as in \"5 1s\".");
		return false;
	}

	/* stop accumulating past the limit, so that any length is safe */
	for (i = negative ? 1 : 0; i < tok->len && value < POLICY_MAX_ATTEMPTS; i++)
		value = value * 10 + (tok->str[i] - '0');

	if (negative || value == 0)
	{
		policy_set_error(err, "count must be at least 1, not %s", qtok);
		if (negative)
			policy_set_hint(err, "The count is the number of retries; leave it out to retry without limit.");
		else
			policy_set_hint(err, "The count is the number of retries; to run a call once and never retry it, use max_attempts => 1.");
		return false;
	}
	if (value > POLICY_MAX_ATTEMPTS - 1)
	{
		policy_set_error(err, "count %s exceeds the maximum of %d",
						 qtok, POLICY_MAX_ATTEMPTS - 1);
		policy_set_hint(err, "Leave the count out to retry without limit.");
		return false;
	}
	*count = (int32_t) value;
	return true;
}

/*
 * parse_delay
 *		Parse the minimum or maximum delay of a policy ('what' says which).
 *
 * A delay written with a minus sign gets a message about the delay rather
 * than about the duration syntax, since that is what the user meant.
 */
static bool
parse_delay(const Token *tok, const char *what, int64_t * delay,
			PolicyError *err)
{
	char		qtok[QUOTED_LEN];

	if (tok->len > 1 && tok->str[0] == '-' &&
		policy_parse_duration(tok->str + 1, tok->len - 1, NULL, NULL))
	{
		policy_set_error(err, "%s delay must be positive, not %s",
						 what, policy_quote(qtok, tok->str, tok->len));
		policy_set_hint(err, "Write delays without a sign, as in \"5s\".");
		return false;
	}
	return policy_parse_duration(tok->str, tok->len, delay, err);
}

/*
 * policy_parse
 *		Parse a policy string '[count] min [max]'.
 *
 * The parts are read left to right and the first problem found is reported.
 * The first part is a count when it is a bare number and something follows
 * it; a bare number alone ("10") is a count missing its delay.  A PolicySpec
 * is written only on success; when there is no count, count is 0, and when
 * there is no max, max_delay is -1 (a fixed delay), as policy_format takes
 * them.
 */
bool
policy_parse(const char *str, PolicySpec *result, PolicyError *err)
{
	Token		tokens[MAX_TOKENS];
	int			ntokens = 0;
	int			i = 0;
	size_t		pos = 0;
	PolicySpec	spec;
	char		q1[QUOTED_LEN];
	char		q2[QUOTED_LEN];

	clear_error(err);
	memset(&spec, 0, sizeof(spec));
	spec.max_delay = -1;

	/* Split on white space; nothing past MAX_TOKENS is ever needed */
	while (str != NULL && str[pos] != '\0' && ntokens < MAX_TOKENS)
	{
		size_t		start;

		while (is_space(str[pos]))
			pos++;
		if (str[pos] == '\0')
			break;
		start = pos;
		while (str[pos] != '\0' && !is_space(str[pos]))
			pos++;
		tokens[ntokens].str = str + start;
		tokens[ntokens].len = pos - start;
		ntokens++;
	}

	if (ntokens == 0)
	{
		policy_set_error(err, "policy is empty");
		policy_set_hint(err, "Write \"[count] min [max]\", for example \"5 1s 1h\".");
		return false;
	}

	/* The count */
	if (is_number_token(&tokens[0], true) ||
		(is_number_token(&tokens[0], false) && ntokens > 1))
	{
		if (!check_split_unit(tokens, ntokens, 0, err))
			return false;
		if (!parse_count(&tokens[0], &spec.count, err))
			return false;
		spec.has_count = true;
		policy_quote(q1, tokens[0].str, tokens[0].len);
		if (ntokens == 1)
		{
			policy_set_error(err, "missing minimum delay after count %s", q1);
			policy_set_hint(err, "Add a delay with a unit, as in \"5 1s\" (5 retries, 1 second apart), or give the number a unit to make it a delay, as in \"5s\".");
			return false;
		}
		if (!check_split_unit(tokens, ntokens, 1, err))
			return false;
		if (is_number_token(&tokens[1], true))
		{
			policy_set_error(err, "count %s is followed by another count %s",
							 q1, policy_quote(q2, tokens[1].str, tokens[1].len));
			policy_set_hint(err, "Only the first part can be a count; a delay needs a unit, as in \"5 1s\".");
			return false;
		}
		i = 1;
	}

	/* The minimum delay */
	if (!check_split_unit(tokens, ntokens, i, err))
		return false;
	if (!parse_delay(&tokens[i], "minimum", &spec.min_delay, err))
		return false;
	if (spec.min_delay == 0)
	{
		policy_set_error(err, "minimum delay must be positive, not %s",
						 policy_quote(q1, tokens[i].str, tokens[i].len));
		policy_set_hint(err, "Use a delay greater than zero, such as \"100ms\" or \"1s\".");
		return false;
	}
	i++;

	/* The maximum delay */
	if (i < ntokens)
	{
		if (!check_split_unit(tokens, ntokens, i, err))
			return false;
		if (!parse_delay(&tokens[i], "maximum", &spec.max_delay, err))
			return false;
		spec.has_max = true;
		i++;
	}

	if (i < ntokens)
	{
		policy_set_error(err, "too many parts: %s follows the maximum delay",
						 policy_quote(q1, tokens[i].str, tokens[i].len));
		policy_set_hint(err, "A policy is \"[count] min [max]\", for example \"5 1s 1h\".");
		return false;
	}

	if (spec.has_max && spec.max_delay < spec.min_delay)
	{
		policy_set_error(err, "maximum delay %s is less than minimum delay %s",
						 policy_quote(q1, tokens[i - 1].str, tokens[i - 1].len),
						 policy_quote(q2, tokens[i - 2].str, tokens[i - 2].len));
		policy_set_hint(err, "The maximum delay caps the exponential backoff, so it must be at least the minimum delay.");
		return false;
	}

	if (result != NULL)
		*result = spec;
	return true;
}

/*
 * TextOut
 *		A bounded output buffer with snprintf's contract: text past the end
 *		is dropped but still counted, and the result is always terminated
 *		when there is any room at all.
 */
typedef struct TextOut
{
	char	   *buf;
	size_t		size;
	size_t		len;
} TextOut;

/*
 * out_char
 *		Append one character to a TextOut, if it fits with its terminator.
 */
static void
out_char(TextOut *out, char c)
{
	if (out->buf != NULL && out->len + 1 < out->size)
		out->buf[out->len] = c;
	out->len++;
}

/*
 * out_str
 *		Append a NUL-terminated string to a TextOut.
 */
static void
out_str(TextOut *out, const char *str)
{
	while (*str != '\0')
		out_char(out, *str++);
}

/*
 * out_uint
 *		Append an unsigned number in decimal to a TextOut.
 *
 * Done by hand rather than with snprintf and PRIu64, so that nothing here
 * depends on how the platform spells a 64-bit format.
 */
static void
out_uint(TextOut *out, uint64_t value)
{
	char		digits[24];
	int			n = 0;

	do
	{
		digits[n++] = (char) ('0' + value % 10);
		value /= 10;
	} while (value > 0);
	while (n > 0)
		out_char(out, digits[--n]);
}

/*
 * out_finish
 *		Terminate a TextOut's buffer and return the full length of the text.
 */
static size_t
out_finish(TextOut *out)
{
	if (out->buf != NULL && out->size > 0)
		out->buf[out->len < out->size ? out->len : out->size - 1] = '\0';
	return out->len;
}

/*
 * out_duration
 *		Append a duration to a TextOut, in the form policy_format_duration
 *		documents.
 */
static void
out_duration(TextOut *out, int64_t usecs)
{
	static const int64_t unit_usecs[] = {
		POLICY_USECS_PER_DAY, POLICY_USECS_PER_HOUR,
		POLICY_USECS_PER_MIN, POLICY_USECS_PER_SEC
	};
	static const char unit_names[] = {'d', 'h', 'm', 's'};
	uint64_t	rest;
	uint64_t	ms;
	uint64_t	us;
	int			i;

	if (usecs == 0)
	{
		out_str(out, "0s");
		return;
	}
	if (usecs < 0)
	{
		/* not a valid duration, but show it rather than wrap around */
		out_char(out, '-');
		rest = (uint64_t) (-(usecs + 1)) + 1;
	}
	else
		rest = (uint64_t) usecs;

	for (i = 0; i < 4; i++)
	{
		uint64_t	n = rest / (uint64_t) unit_usecs[i];

		if (n > 0)
		{
			out_uint(out, n);
			out_char(out, unit_names[i]);
		}
		rest %= (uint64_t) unit_usecs[i];
	}

	ms = rest / 1000;
	us = rest % 1000;
	if (ms > 0 || us > 0)
	{
		out_uint(out, ms);
		if (us > 0)
		{
			out_char(out, '.');
			out_char(out, (char) ('0' + us / 100));
			if (us % 100 != 0)
			{
				out_char(out, (char) ('0' + us / 10 % 10));
				if (us % 10 != 0)
					out_char(out, (char) ('0' + us % 10));
			}
		}
		out_str(out, "ms");
	}
}

/*
 * policy_format_duration
 *		Write a duration as the text policy_parse_duration reads back as
 *		exactly the same value.
 *
 * The form is canonical rather than the fewest characters: whole days,
 * hours, minutes, seconds and milliseconds, leaving out the zero ones, with
 * any microseconds as a fraction of the milliseconds ("1h30m", "2s0.25ms",
 * "0.001ms"); zero is "0s".  A fraction with at most three digits on the
 * smallest unit is what makes the round trip exact.  Like snprintf, the
 * return value is the full length of the text even if buf was too short;
 * POLICY_FORMAT_LEN is always enough.  A negative value, which is not a
 * duration, is written with a leading '-'.
 */
size_t
policy_format_duration(int64_t usecs, char *buf, size_t buflen)
{
	TextOut		out = {buf, buflen, 0};

	out_duration(&out, usecs);
	return out_finish(&out);
}

/*
 * policy_format
 *		Write a policy as '[count] min [max]', as it is shown to users.
 *
 * The count is max_attempts - 1, the number of retries, and is left out when
 * max_attempts <= 0 (unlimited); max is left out when max_delay < 0 (a fixed
 * delay).  A policy that never retries shows as "0 ...", which
 * policy_parse deliberately refuses: such a policy is made with
 * max_attempts => 1.  The return value is as for policy_format_duration.
 */
size_t
policy_format(int32_t max_attempts, int64_t min_delay, int64_t max_delay,
			  char *buf, size_t buflen)
{
	TextOut		out = {buf, buflen, 0};

	if (max_attempts > 0)
	{
		out_uint(&out, (uint64_t) (max_attempts - 1));
		out_char(&out, ' ');
	}
	out_duration(&out, min_delay);
	if (max_delay >= 0)
	{
		out_char(&out, ' ');
		out_duration(&out, max_delay);
	}
	return out_finish(&out);
}

/*
 * policy_delay
 *		Delay before retry number 'retry' (1 for the first):
 *		min(max_delay, min_delay * multiplier^(retry - 1)), or min_delay
 *		when max_delay < 0.
 *
 * The power is computed in double, where it may become huge or infinite
 * without harm, and converted to an integer only once it is known to be
 * below the cap (max_delay, never more than POLICY_MAX_DURATION), so no
 * input overflows.  Out-of-contract inputs are tamed rather than trusted: a
 * retry below 1 counts as 1, a multiplier that is NaN or below 1 as 1, a
 * negative min_delay as 0, and min_delay above max_delay gives max_delay as
 * the formula says.  The result is never negative and, for valid input,
 * never below min_delay.
 */
int64_t
policy_delay(int64_t min_delay, int64_t max_delay, double multiplier,
			 int32_t retry)
{
	int64_t		cap;
	double		delay;
	int64_t		result;

	if (min_delay <= 0)
		return 0;
	if (min_delay > POLICY_MAX_DURATION)
		min_delay = POLICY_MAX_DURATION;
	if (max_delay < 0)
		return min_delay;

	cap = (max_delay > POLICY_MAX_DURATION) ? POLICY_MAX_DURATION : max_delay;
	if (min_delay >= cap)
		return cap;
	if (retry <= 1 || isnan(multiplier) || multiplier <= 1.0)
		return min_delay;

	/* min_delay < 2^53 is exact in a double; an infinite power is fine */
	delay = (double) min_delay * pow(multiplier, (double) retry - 1.0);
	if (!(delay < (double) cap))
		return cap;

	/* delay is now below cap, well inside int64 range; round to nearest */
	result = (int64_t) (delay + 0.5);
	if (result > cap)
		result = cap;
	if (result < min_delay)
		result = min_delay;
	return result;
}

/*
 * mul_high64
 *		The high 64 bits of the 128-bit product a * b.
 *
 * Portable C99 (no __int128): the four 32-bit partial products, with the
 * middle column summed so that it cannot overflow.
 */
static uint64_t
mul_high64(uint64_t a, uint64_t b)
{
	uint64_t	a_lo = a & UINT64_C(0xffffffff);
	uint64_t	a_hi = a >> 32;
	uint64_t	b_lo = b & UINT64_C(0xffffffff);
	uint64_t	b_hi = b >> 32;
	uint64_t	lo_lo = a_lo * b_lo;
	uint64_t	hi_lo = a_hi * b_lo;
	uint64_t	lo_hi = a_lo * b_hi;
	uint64_t	hi_hi = a_hi * b_hi;
	uint64_t	middle;

	/* at most (2^32 - 1)^2 + 2 * (2^32 - 1) = 2^64 - 1 */
	middle = (lo_lo >> 32) + (hi_lo & UINT64_C(0xffffffff)) + lo_hi;
	return hi_hi + (hi_lo >> 32) + (middle >> 32);
}

/*
 * uniform_upto
 *		Map a uniform 64-bit random value to a uniform value in [0, bound].
 *
 * floor(random * (bound + 1) / 2^64) is never above bound and, unlike a
 * modulo, has a bias of at most one part in 2^64 / (bound + 1), far below
 * anything that matters for delays of at most ten years in microseconds.
 */
static uint64_t
uniform_upto(uint64_t random, uint64_t bound)
{
	return mul_high64(random, bound + 1);
}

/*
 * policy_jitter
 *		Apply jitter to a delay, using 'random' as a uniformly distributed
 *		64-bit value: FULL gives [0, delay], EQUAL gives
 *		[delay - delay/2, delay], NONE the delay itself.
 *
 * The result is a pure function of its arguments, so callers (and tests)
 * choose the randomness.  Both ends of each range can be drawn: random 0
 * gives the low end and UINT64_MAX the delay itself.  A delay of 0 stays 0,
 * and a negative delay, which is not a delay, gives 0.
 */
int64_t
policy_jitter(int64_t delay, PolicyJitter jitter, uint64_t random)
{
	int64_t		half;

	if (delay <= 0)
		return 0;
	switch (jitter)
	{
		case POLICY_JITTER_FULL:
			return (int64_t) uniform_upto(random, (uint64_t) delay);
		case POLICY_JITTER_EQUAL:
			half = delay / 2;
			return (delay - half) + (int64_t) uniform_upto(random, (uint64_t) half);
		case POLICY_JITTER_NONE:
			break;
	}
	return delay;
}

/*
 * policy_parse_jitter
 *		Look up a jitter kind by name: "none", "full" or "equal".
 *
 * Case is ignored, as PostgreSQL does for enum-like settings; anything else,
 * including a NULL pointer, returns false.
 */
bool
policy_parse_jitter(const char *str, PolicyJitter *result)
{
	int			i;

	if (str == NULL)
		return false;
	for (i = 0; i < (int) (sizeof(jitter_names) / sizeof(jitter_names[0])); i++)
	{
		const char *name = jitter_names[i];
		size_t		j;

		for (j = 0; name[j] != '\0'; j++)
		{
			if (to_lower_ascii(str[j]) != name[j])
				break;
		}
		if (name[j] == '\0' && str[j] == '\0')
		{
			if (result != NULL)
				*result = (PolicyJitter) i;
			return true;
		}
	}
	return false;
}

/*
 * policy_jitter_name
 *		The name of a jitter kind, as policy_parse_jitter reads it.
 *
 * An out-of-range value gives "unknown" rather than NULL, so that a bug
 * shows up as text that fails to parse instead of as a crash.
 */
const char *
policy_jitter_name(PolicyJitter jitter)
{
	switch (jitter)
	{
		case POLICY_JITTER_NONE:
		case POLICY_JITTER_FULL:
		case POLICY_JITTER_EQUAL:
			return jitter_names[jitter];
	}
	return "unknown";
}

/*
 * is_sqlstate_char
 *		Is c one of the characters a SQLSTATE is made of, [0-9A-Z]?
 */
static bool
is_sqlstate_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
}

/*
 * entry_code_len
 *		Length of the code in a normalized retry_on entry (after any '-'),
 *		read without trusting the entry to be terminated.
 */
static size_t
entry_code_len(const char *entry)
{
	const char *code = entry + (entry[0] == '-' ? 1 : 0);
	const char *end = memchr(code, '\0',
							 POLICY_SQLSTATE_ENTRY_LEN - (size_t) (code - entry));

	return end == NULL ? 0 : (size_t) (end - code);
}

/*
 * policy_normalize_retry_on
 *		Check and normalize a retry_on list.
 *
 * Each entry becomes an optional '-' and an upper-case 5-character SQLSTATE
 * or 2-character class.  Entries are kept in their input order with
 * duplicates dropped, and "RT" is appended at the end unless the list
 * already names it (included, or excluded with "-RT").  The errors name the
 * entry at fault: a null element (by its 1-based position), anything that is
 * not a SQLSTATE or class, a success, warning or no-data code (classes 00,
 * 01 and 02, which are never errors), and a code both included and
 * excluded, which would leave the reader guessing.
 */
int
policy_normalize_retry_on(const char *const *entries, int n,
						  char (*out)[POLICY_SQLSTATE_ENTRY_LEN],
						  PolicyError *err)
{
	int			nout = 0;
	int			i;
	bool		has_rt = false;
	char		qentry[QUOTED_LEN];
	char		qcode[QUOTED_LEN];

	clear_error(err);
	if (n < 0 || out == NULL)
	{
		policy_set_error(err, "invalid retry_on list");
		return -1;
	}

	for (i = 0; i < n; i++)
	{
		const char *entry = (entries == NULL) ? NULL : entries[i];
		const char *code;
		const char *normcode;
		char		norm[POLICY_SQLSTATE_ENTRY_LEN];
		bool		exclude;
		bool		valid;
		bool		duplicate = false;
		size_t		len;
		size_t		j;
		int			k;

		if (entry == NULL)
		{
			policy_set_error(err, "retry_on element %d is null", i + 1);
			policy_set_hint(err, "Each element is a SQLSTATE such as \"40001\" or a class such as \"08\".");
			return -1;
		}

		exclude = (entry[0] == '-');
		code = entry + (exclude ? 1 : 0);
		len = strlen(code);
		policy_quote(qentry, entry, strlen(entry));

		valid = (len == 2 || len == 5);
		j = 0;
		if (exclude)
			norm[j++] = '-';
		for (k = 0; valid && k < (int) len; k++)
		{
			char		c = code[k];

			if (c >= 'a' && c <= 'z')
				c = (char) (c - 'a' + 'A');
			if (!is_sqlstate_char(c))
				valid = false;
			norm[j++] = c;
		}
		if (!valid)
		{
			policy_set_error(err, "invalid SQLSTATE or class %s", qentry);
			policy_set_hint(err, "Use a 5-character SQLSTATE such as \"40001\" or a 2-character class such as \"08\".");
			return -1;
		}
		norm[j] = '\0';
		normcode = norm + (exclude ? 1 : 0);
		policy_quote(qcode, normcode, len);

		if (normcode[0] == '0' && normcode[1] >= '0' && normcode[1] <= '2')
		{
			policy_set_error(err, "%s %s is not an error",
							 len == 2 ? "class" : "SQLSTATE", qcode);
			policy_set_hint(err, "Classes 00 (success), 01 (warning) and 02 (no data) are not errors, so they are never retried.");
			return -1;
		}

		for (k = 0; k < nout; k++)
		{
			const char *other = out[k] + (out[k][0] == '-' ? 1 : 0);

			if (strcmp(other, normcode) != 0)
				continue;
			if ((out[k][0] == '-') != exclude)
			{
				policy_set_error(err, "retry_on both includes and excludes %s", qcode);
				policy_set_hint(err, "Remove either \"%s\" or \"-%s\".", normcode, normcode);
				return -1;
			}
			duplicate = true;
		}
		if (strcmp(normcode, "RT") == 0)
			has_rt = true;
		if (!duplicate)
			memcpy(out[nout++], norm, sizeof(norm));
	}

	if (!has_rt)
		memcpy(out[nout++], "RT", 3);
	return nout;
}

/*
 * policy_retries_sqlstate
 *		Does a normalized retry_on list retry this 5-character SQLSTATE?
 *
 * The most specific entry decides: an exact code beats its class, so
 * {08, -08006} retries every connection error but 08006, and {-RT, RT429}
 * retries only RT429.  Were a code both included and excluded at the same
 * level (policy_normalize_retry_on refuses that), exclusion wins: when in
 * doubt, do not retry.  No match, or a sqlstate that is not five SQLSTATE
 * characters, means no.
 */
bool
policy_retries_sqlstate(const char (*entries)[POLICY_SQLSTATE_ENTRY_LEN],
						int n, const char *sqlstate)
{
	char		code[5];
	bool		exact_include = false;
	bool		exact_exclude = false;
	bool		class_include = false;
	bool		class_exclude = false;
	int			i;

	if (sqlstate == NULL || entries == NULL)
		return false;
	for (i = 0; i < 5; i++)
	{
		char		c = sqlstate[i];

		if (c >= 'a' && c <= 'z')
			c = (char) (c - 'a' + 'A');
		if (!is_sqlstate_char(c))
			return false;		/* also stops at a short string's NUL */
		code[i] = c;
	}
	if (sqlstate[5] != '\0')
		return false;

	for (i = 0; i < n; i++)
	{
		bool		exclude = (entries[i][0] == '-');
		const char *entry_code = entries[i] + (exclude ? 1 : 0);
		size_t		len = entry_code_len(entries[i]);

		if (len == 5 && memcmp(entry_code, code, 5) == 0)
		{
			if (exclude)
				exact_exclude = true;
			else
				exact_include = true;
		}
		else if (len == 2 && memcmp(entry_code, code, 2) == 0)
		{
			if (exclude)
				class_exclude = true;
			else
				class_include = true;
		}
	}

	if (exact_exclude)
		return false;
	if (exact_include)
		return true;
	if (class_exclude)
		return false;
	return class_include;
}
