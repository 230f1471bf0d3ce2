/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  Cron expressions: parsing into bit sets, and the next matching
 *	  wall-clock minute.  Pure C; see cron.h for the grammar.
 *
 * IDENTIFICATION
 *	  src/cron.c
 *
 *-------------------------------------------------------------------------
 */
#include "core/cron.h"
#include "core/policy.h"

#include <stdio.h>
#include <string.h>

/*
 * Character classes by plain comparison: the <ctype.h> ones depend on the
 * locale and are undefined for negative char values.
 */
static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char
to_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
}

/* the length of the run of non-space characters at str */
static size_t
field_len(const char *str)
{
	size_t		n = 0;

	while (str[n] != '\0' && !is_space(str[n]))
		n++;
	return n;
}

/* The five fields, in order */
typedef enum CronField
{
	CRON_MINUTE,
	CRON_HOUR,
	CRON_DAY,
	CRON_MONTH,
	CRON_WEEKDAY
} CronField;

typedef struct CronFieldInfo
{
	const char *name;			/* for messages */
	int			min;
	int			max;			/* 7 for weekdays: 7 is Sunday again */
	const char *const *names;	/* names of min, min + 1, ...; or NULL */
} CronFieldInfo;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};
static const char *const weekday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const CronFieldInfo fields[5] = {
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day-of-month", 1, 31, NULL},
	{"month", 1, 12, month_names},
	{"day-of-week", 0, 7, weekday_names},
};

/* What the macros stand for */
static const struct
{
	const char *name;
	const char *expansion;
}			macros[] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

#define CRON_HINT "A cron expression has five fields: minute (0-59), hour (0-23), day of month (1-31 or L, the last), month (1-12 or jan-dec) and day of week (0-7 or sun-sat, 0 and 7 are Sunday)."

bool
cron_looks_like_cron(const char *str)
{
	int			nfields = 0;
	bool		in_field = false;

	while (is_space(*str))
		str++;
	if (*str == '@' || strpbrk(str, "*,/") != NULL)
		return true;
	for (; *str; str++)
	{
		if (is_space(*str))
			in_field = false;
		else if (!in_field)
		{
			in_field = true;
			nfields++;
		}
	}
	return nfields == 5;
}

/* 'L', 'l' or '$': the last day of the month, in the day-of-month field */
static bool
is_last_day(char c)
{
	return c == 'L' || c == 'l' || c == '$';
}

/*
 * last_day_alone -- refuse an 'L' that is part of a range, has a step or a
 * suffix ('L-2', '1-L', 'L/7', 'LW': Quartz's forms, which Vixie cron and
 * pg_cron do not have)
 */
static bool
last_day_alone(const char *qpart, PolicyError *err)
{
	policy_set_error(err, "day-of-month L in %s stands alone: it takes no range, step or suffix",
					 qpart);
	policy_set_hint(err, "L (or $) is the last day of the month, as in '0 0 L * *' or in a list such as '0 0 1,15,L * *'.");
	return false;
}

/*
 * parse_value -- a number or (where the field has them) a name at *p, of
 * the field f; advances *p past it
 */
static bool
parse_value(const char **p, CronField f, const char *qpart, int *value,
			PolicyError *err)
{
	const CronFieldInfo *info = &fields[f];
	const char *s = *p;

	if (f == CRON_DAY && is_last_day(*s))
		return last_day_alone(qpart, err);
	if (is_digit(*s))
	{
		long		v = 0;

		while (is_digit(*s))
		{
			v = v * 10 + (*s - '0');
			if (v > 1000)
				v = 1000;		/* out of range anyway; no overflow */
			s++;
		}
		if (v < info->min || v > info->max)
		{
			policy_set_error(err, "%s value %.*s%s is out of range %d-%d in %s",
							 info->name, (int) (s - *p > 20 ? 20 : s - *p), *p,
							 s - *p > 20 ? "..." : "", info->min, info->max, qpart);
			policy_set_hint(err, CRON_HINT);
			return false;
		}
		*value = (int) v;
		*p = s;
		return true;
	}
	if (info->names != NULL && is_alpha(*s))
	{
		for (int i = 0; info->names[i] != NULL; i++)
		{
			const char *n = info->names[i];

			if (to_lower(s[0]) == n[0] && to_lower(s[1]) == n[1] &&
				to_lower(s[2]) == n[2] && !is_alpha(s[3]) && !is_digit(s[3]))
			{
				*value = info->min + i;
				*p = s + 3;
				return true;
			}
		}
		policy_set_error(err, "unknown %s name in %s", info->name, qpart);
		policy_set_hint(err, f == CRON_MONTH ?
						"Month names are jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov and dec." :
						"Day names are sun, mon, tue, wed, thu, fri and sat.");
		return false;
	}
	policy_set_error(err, "%s field %s is not a number%s", info->name, qpart,
					 info->names != NULL ? " or a name" : "");
	policy_set_hint(err, CRON_HINT);
	return false;
}

/*
 * parse_field -- one field's text (str[0..len)) into the bit set *bits
 */
static bool
parse_field(const char *str, size_t len, CronField f, uint64_t *bits,
			PolicyError *err)
{
	const CronFieldInfo *info = &fields[f];
	char		part[64];
	char		qpart[POLICY_QUOTED_LEN];
	const char *p;

	policy_quote(qpart, str, len);
	if (len >= sizeof(part))
	{
		policy_set_error(err, "%s field %s is too long", info->name, qpart);
		return false;
	}
	memcpy(part, str, len);
	part[len] = '\0';

	*bits = 0;
	p = part;
	for (;;)
	{
		int			from,
					to,
					step = 1;

		/* 'L', alone or as an element of a list */
		if (f == CRON_DAY && is_last_day(*p) && (p[1] == ',' || p[1] == '\0'))
		{
			*bits |= CRON_LAST_DAY;
			if (p[1] == '\0')
				return true;
			p += 2;
			continue;
		}
		if (*p == '*')
		{
			from = info->min;
			to = info->max;
			p++;
		}
		else
		{
			if (!parse_value(&p, f, qpart, &from, err))
				return false;
			to = from;
			if (*p == '-')
			{
				p++;
				if (!parse_value(&p, f, qpart, &to, err))
					return false;
				if (to < from)
				{
					policy_set_error(err, "%s range %d-%d runs backwards in %s",
									 info->name, from, to, qpart);
					return false;
				}
			}
			else if (*p == '/')
				to = info->max; /* 'a/step': from a to the end */
		}
		if (*p == '/')
		{
			long		s = 0;

			p++;
			if (!is_digit(*p))
			{
				policy_set_error(err, "%s step in %s is not a number", info->name, qpart);
				return false;
			}
			while (is_digit(*p))
			{
				s = s * 10 + (*p - '0');
				if (s > 1000)
					s = 1000;
				p++;
			}
			if (s < 1 || s > info->max)
			{
				policy_set_error(err, "%s step %ld%s is out of range 1-%d in %s",
								 info->name, s, s >= 1000 ? "..." : "", info->max, qpart);
				return false;
			}
			step = (int) s;
		}
		for (int v = from; v <= to; v += step)
			*bits |= UINT64_C(1) << v;
		if (*p == ',')
		{
			p++;
			continue;
		}
		if (*p != '\0')
		{
			char		qc[POLICY_QUOTED_LEN];

			policy_set_error(err, "unexpected %s in %s field %s",
							 policy_quote(qc, p, strlen(p)), info->name, qpart);
			policy_set_hint(err, CRON_HINT);
			return false;
		}
		return true;
	}
}

int
cron_days_in_month(int year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool		leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : days[month - 1];
}

int
cron_weekday(int year, int month, int day)
{
	/* Sakamoto's method */
	static const int t[12] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};

	int			w;

	if (month < 3)
		year -= 1;
	w = (year + year / 4 - year / 100 + year / 400 + t[month - 1] + day) % 7;
	/* never negative, whatever the year (a day before the year 1) */
	return w < 0 ? w + 7 : w;
}

bool
cron_parse(const char *str, CronSpec *result, PolicyError *err)
{
	const char *p = str;
	uint64_t	bits[5];
	bool		star[5];
	bool		some_day = false;
	char		qstr[POLICY_QUOTED_LEN];

	policy_quote(qstr, str, strlen(str));
	while (is_space(*p))
		p++;
	if (*p == '@')
	{
		size_t		len = field_len(p);
		const char *rest = p + len;
		char		qmacro[POLICY_QUOTED_LEN];

		while (is_space(*rest))
			rest++;
		for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
		{
			if (strlen(macros[i].name) == len && *rest == '\0' &&
				strncmp(p, macros[i].name, len) == 0)
				return cron_parse(macros[i].expansion, result, err);
		}
		policy_set_error(err, "unknown cron macro %s", policy_quote(qmacro, p, len));
		policy_set_hint(err, "The macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @reboot (at each start of the server).");
		return false;
	}

	for (int f = 0; f < 5; f++)
	{
		size_t		len;

		while (is_space(*p))
			p++;
		len = field_len(p);
		if (len == 0)
		{
			policy_set_error(err, "cron expression %s has %d fields, not 5", qstr, f);
			policy_set_hint(err, CRON_HINT);
			return false;
		}
		star[f] = (*p == '*');
		if (!parse_field(p, len, (CronField) f, &bits[f], err))
			return false;
		p += len;
	}
	while (is_space(*p))
		p++;
	if (*p != '\0')
	{
		policy_set_error(err, "cron expression %s has more than 5 fields", qstr);
		policy_set_hint(err, CRON_HINT);
		return false;
	}

	result->minutes = bits[CRON_MINUTE];
	result->hours = (uint32_t) bits[CRON_HOUR];
	result->days = (uint32_t) bits[CRON_DAY];
	result->months = (uint16_t) bits[CRON_MONTH];
	/* 7 is Sunday too */
	result->weekdays = (uint8_t) ((bits[CRON_WEEKDAY] | (bits[CRON_WEEKDAY] >> 7)) & 0x7f);
	result->days_star = star[CRON_DAY];
	result->weekdays_star = star[CRON_WEEKDAY];

	/*
	 * A day of month that no chosen month has never fires, unless the day of
	 * week alone can (both day fields restricted: either one matches).
	 */
	if (result->days_star || !result->weekdays_star)
		return true;
	some_day = (result->days & CRON_LAST_DAY) != 0;
	for (int m = 1; m <= 12 && !some_day; m++)
	{
		if (result->months & (1u << m))
			for (int d = 1; d <= cron_days_in_month(2000, m); d++)
				if (result->days & (UINT32_C(1) << d))
					some_day = true;
	}
	if (!some_day)
	{
		policy_set_error(err, "cron expression %s never fires: no chosen month has the chosen days of month", qstr);
		return false;
	}
	return true;
}

bool
cron_day_matches(const CronSpec *spec, int year, int month, int day)
{
	bool		dom = (spec->days & (UINT32_C(1) << day)) != 0 ||
	((spec->days & CRON_LAST_DAY) && day == cron_days_in_month(year, month));
	bool		dow = (spec->weekdays & (1u << cron_weekday(year, month, day))) != 0;

	if (!(spec->months & (1u << month)))
		return false;
	if (spec->days_star || spec->weekdays_star)
		return dom && dow;
	return dom || dow;
}

bool
cron_matches(const CronSpec *spec, const CronTime *t)
{
	return (spec->minutes >> t->minute & 1) && (spec->hours >> t->hour & 1) &&
		cron_day_matches(spec, t->year, t->month, t->day);
}

void
cron_add_minute(CronTime *t)
{
	if (++t->minute < 60)
		return;
	t->minute = 0;
	if (++t->hour < 24)
		return;
	t->hour = 0;
	if (++t->day <= cron_days_in_month(t->year, t->month))
		return;
	t->day = 1;
	if (++t->month <= 12)
		return;
	t->month = 1;
	t->year++;
}

int
cron_compare(const CronTime *a, const CronTime *b)
{
	if (a->year != b->year)
		return a->year < b->year ? -1 : 1;
	if (a->month != b->month)
		return a->month < b->month ? -1 : 1;
	if (a->day != b->day)
		return a->day < b->day ? -1 : 1;
	if (a->hour != b->hour)
		return a->hour < b->hour ? -1 : 1;
	if (a->minute != b->minute)
		return a->minute < b->minute ? -1 : 1;
	return 0;
}

/* first_bit_from -- the lowest set bit of bits at or above 'from', or -1 */
static int
first_bit_from(uint64_t bits, int from, int limit)
{
	for (int i = from; i <= limit; i++)
		if (bits & (UINT64_C(1) << i))
			return i;
	return -1;
}

bool
cron_next(const CronSpec *spec, const CronTime *after, CronTime *next)
{
	int			year = after->year;
	int			month = after->month;
	int			day = after->day;
	int			hour = after->hour;
	int			minute = after->minute + 1;

	if (minute > 59)
	{
		minute = 0;
		hour++;
	}
	for (int n = 0; n < CRON_SEARCH_DAYS; n++)
	{
		if (hour <= 23 && cron_day_matches(spec, year, month, day))
		{
			for (int h = first_bit_from(spec->hours, hour, 23); h >= 0;
				 h = first_bit_from(spec->hours, h + 1, 23))
			{
				int			m = first_bit_from(spec->minutes, h == hour ? minute : 0, 59);

				if (m >= 0)
				{
					next->year = year;
					next->month = month;
					next->day = day;
					next->hour = h;
					next->minute = m;
					return true;
				}
			}
		}
		/* the next day, from its first minute */
		hour = 0;
		minute = 0;
		if (++day > cron_days_in_month(year, month))
		{
			day = 1;
			if (++month > 12)
			{
				month = 1;
				if (++year > 9999)
					return false;
			}
		}
	}
	return false;
}
