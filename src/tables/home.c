/*-------------------------------------------------------------------------
 *
 * home.c
 *	  Whether this database is a copy of the one the extension was made in
 *	  (version 1.7).
 *
 * CREATE DATABASE ... TEMPLATE copies a database file by file: the copy
 * holds every role's scheduled calls and schedules, and the workers would
 * run them there, a second time, as their roles, in a database whose
 * owner (whoever made the copy) chooses its settings: a search_path that
 * puts her functions before pg_catalog's ran her code as each of them (the
 * seventh hostile review).  None of those roles chose to run anything in
 * the copy.  A restore from pg_dump, which loads the same rows, is refused
 * them unless its roles may (restore.c); a copy is not seen by anything
 * but the tables it brings.
 *
 * retries.home holds the OID of the database the extension was made in
 * (not dumped: a restore's CREATE EXTENSION writes its own; pg_upgrade
 * keeps the OIDs of databases).  In a copy it holds the template's.  The
 * first worker of a copy, before it runs anything, settles it: the calls
 * still scheduled that were made before the copy (those it brought) are
 * cancelled, saying why (retries.retry_now() of one runs it here: its role's
 * choice, or an administrator's), its schedules made before the copy are
 * paused (resume_schedule()) and dated from the copy (their created_at:
 * one its role resumes here is its own), and retries.home takes the copy's
 * OID.  The
 * calls and schedules made in the copy itself run as anywhere.  The
 * database was made when its PG_VERSION file was written, by either
 * strategy of CREATE DATABASE.  (An earlier design held the whole copy until
 * a superuser adopted it: a call that any role made in a template kept
 * with the extension in it held every database made from it, the eighth
 * hostile review.)
 *
 * A template whose extension is older than 1.7 has no retries.home, and
 * ALTER EXTENSION UPDATE in its copy would write the copy's own OID there.
 * So CREATE DATABASE also leaves a note in the data directory,
 * pg_retries/made.<database> holding the template's OID and the moment
 * (hooks.c, not in a
 * binary upgrade: pg_upgrade's CREATE DATABASE makes no copy), and a
 * database with a note is settled as a copy at whatever version its
 * extension is: the rows made before its PG_VERSION file were the
 * template's.  A database made from a template without the extension
 * loses its note when CREATE EXTENSION retries makes the extension there
 * (a restore's too: the rows it loads were made before the database, and
 * are not a copy's); a copy's goes once its first worker has settled it,
 * and any with DROP DATABASE.  The note is a file, not WAL: a standby promoted, a
 * backup restored or a cluster upgraded since the copy was made has none,
 * and only retries.home (1.7) speaks for such a copy.
 *
 * IDENTIFICATION
 *	  src/tables/home.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "common/relpath.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "tables/tables.h"

/*
 * database_made_at -- when this database was made: the time its PG_VERSION
 * file was written (DT_NOEND, so that every row counts, if it cannot be
 * read)
 */
static TimestampTz
database_made_at(void)
{
	char	   *dir = GetDatabasePath(MyDatabaseId, MyDatabaseTableSpace);
	char	   *path = psprintf("%s/PG_VERSION", dir);
	struct stat st;

	if (stat(path, &st) != 0)
		return DT_NOEND;
#ifdef __linux__
	return time_t_to_timestamptz(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1000;
#else
	return time_t_to_timestamptz(st.st_mtime + 1);
#endif
}

/*
 * note_path -- the note of a database made by CREATE DATABASE (see the top)
 */
static void
note_path(char *path, size_t len, Oid dboid)
{
	snprintf(path, len, "%s/made.%u", RETRIES_DIR, dboid);
}

/*
 * tables_note_made_database -- database 'dboid' was made from 'template' at
 * 'made_at' (by CREATE DATABASE, or a copy found unsettled): leave the note
 * its workers read (see the top), durably
 */
void
tables_note_made_database(Oid dboid, Oid template, TimestampTz made_at)
{
	char		path[MAXPGPATH];
	char		contents[64];
	int			fd;
	int			len = snprintf(contents, sizeof(contents), "%u " INT64_FORMAT "\n",
							   template, (int64) made_at);

	if (MakePGDirectory(RETRIES_DIR) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not create directory \"%s\": %m", RETRIES_DIR)));
	note_path(path, sizeof(path), dboid);
	fd = OpenTransientFile(path, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, contents, len) != len || pg_fsync(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not write \"%s\": %m", path)));
	CloseTransientFile(fd);
	fsync_fname(RETRIES_DIR, true);
}

/*
 * tables_forget_made_database -- remove the note of a database, if any
 * (once it is settled, or dropped)
 */
void
tables_forget_made_database(Oid dboid)
{
	char		path[MAXPGPATH];

	note_path(path, sizeof(path), dboid);
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("retries: could not remove \"%s\": %m", path)));
}

/* The transaction that made this database its own, below version 1.7 */
static TransactionId forget_note_xid = InvalidTransactionId;

/*
 * forget_note_at_commit -- transaction callback: the note goes with the
 * commit of the transaction that made the database its own
 */
static void
forget_note_at_commit(XactEvent event, void *arg)
{
	if (!TransactionIdIsValid(forget_note_xid))
		return;
	if (event == XACT_EVENT_COMMIT && TransactionIdEquals(forget_note_xid, GetTopTransactionIdIfAny()))
		tables_forget_made_database(MyDatabaseId);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		forget_note_xid = InvalidTransactionId;
}

/*
 * tables_restored_here -- a restore's CREATE EXTENSION found the extension
 * here (from a template1 that has it, with no rows: a restore is refused
 * rows made before it, restore.c), in a superuser's session, or a restore
 * loaded rows into the extension's tables (COPY: a database owner's
 * restore, or one of data only, has no CREATE EXTENSION of a superuser's):
 * the database is its own, not a copy, and the rows the restore loads are
 * not the template's (the tenth and eleventh hostile reviews: a late first
 * worker settled them as a copy's).  From version 1.7 that is written in
 * retries.home, with the restore's transaction, and the note is left for
 * the first worker to forget; before, the note goes when the transaction
 * commits.  Either way a restore refused later in its transaction (a copy
 * has rows) leaves the database as it was (the eleventh review's finding 5:
 * the note went at once, and the copy was never settled).
 */
void
tables_restored_here(void)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(MyDatabaseId)};
	RetriesUserSwitch save;
	static bool callback_registered = false;

	if (schema_retries_version() < SCHEMA_1_7)
	{
		if (!callback_registered)
		{
			RegisterXactCallback(forget_note_at_commit, NULL);
			callback_registered = true;
		}
		forget_note_xid = GetTopTransactionId();
		return;
	}
	/* as the extension's owner, in a restore too (as restore.c reads) */
	schema_switch_to_owner(&save);
	SPI_connect();
	if (SPI_execute_with_args("UPDATE retries.home SET datid = $1"
							  " WHERE datid OPERATOR(pg_catalog.<>) $1",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not write retries.home");
	SPI_finish();
	schema_switch_back(&save);
}

/*
 * made_from -- the template this database was made from, and when, if a
 * note says so (InvalidOid otherwise); a note without a time (none is
 * written so) gives PG_VERSION's
 */
static Oid
made_from(TimestampTz *made_at)
{
	char		path[MAXPGPATH];
	char		contents[64] = {0};
	int			fd;
	unsigned long template = 0;
	char	   *end;
	long long	when;

	note_path(path, sizeof(path), MyDatabaseId);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno != ENOENT)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("retries: could not open \"%s\": %m", path)));
		return InvalidOid;
	}
	if (read(fd, contents, sizeof(contents) - 1) < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not read \"%s\": %m", path)));
	CloseTransientFile(fd);
	template = strtoul(contents, &end, 10);
	when = strtoll(end, NULL, 10);
	*made_at = when > 0 ? (TimestampTz) when : database_made_at();
	/* a note that says nothing still says that this is a copy */
	return template > 0 && template <= PG_UINT32_MAX ? (Oid) template : Template1DbOid;
}

/*
 * tables_not_a_copy -- may a restore's COPY make this database its own
 * (tables_restored_here)?  Only if CREATE DATABASE left a note and no call
 * or schedule was made before the moment it holds: a copy's rows were.
 * (The ids tell a restore's rows from older ones only while a restore
 * holds the extension: after a restore of the schema only they stay
 * scattered, and a copy of that database passed the check of restore.c:
 * its owner's COPY of no rows made her copy its own, and alice's copied
 * call ran there, the twelfth hostile review.)  Without a note, no.  At
 * every version of the extension (until the thirteenth hostile review,
 * from 1.7 only: a data-only restore into a database made from a template
 * at 1.6 was settled as a copy, and every restored call cancelled).  As
 * the extension's owner.
 */
bool
tables_not_a_copy(void)
{
	TimestampTz made_at = 0;
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1];
	RetriesUserSwitch save;
	bool		older;

	if (!OidIsValid(made_from(&made_at)))
		return false;
	values[0] = TimestampTzGetDatum(made_at);
	schema_switch_to_owner(&save);
	SPI_connect();
	if (SPI_execute_with_args(schema_retries_version() < SCHEMA_1_2 ?
							  "SELECT FROM retries.call_data"
							  " WHERE created_at OPERATOR(pg_catalog.<) $1 LIMIT 1" :
							  "SELECT FROM retries.call_data"
							  " WHERE created_at OPERATOR(pg_catalog.<) $1"
							  " UNION ALL SELECT FROM retries.schedule_data"
							  " WHERE created_at OPERATOR(pg_catalog.<) $1 LIMIT 1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the rows of a restore");
	older = SPI_processed > 0;
	SPI_finish();
	schema_switch_back(&save);
	return !older;
}

/*
 * home_of -- the database that retries.home names if it is another, locked
 * (so that one worker settles a copy: the others wait, and find it done),
 * or InvalidOid (also below version 1.7)
 */
static Oid
home_of(RetriesSchemaVersion version)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(MyDatabaseId)};
	bool		isnull;

	if (version < SCHEMA_1_7)
		return InvalidOid;
	if (SPI_execute_with_args("SELECT datid FROM retries.home"
							  " WHERE datid OPERATOR(pg_catalog.<>) $1 FOR UPDATE",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read retries.home");
	if (SPI_processed == 0)
		return InvalidOid;
	return DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
}

/* The parameters of the settling statements (see settle) */
#define SETTLE_NARGS	4

/*
 * settle -- run one of the settling statements, with a call's id or the
 * copy's OID ($1), the moment it was made ($2), why ($3) and the pattern
 * of the messages of the calls it settled before ($4); the rows it changed
 * or read
 */
static uint64
settle(const char *sql, int expected, Datum *values)
{
	Oid			argtypes[SETTLE_NARGS] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID};

	if (SPI_execute_with_args(sql, SETTLE_NARGS, argtypes, values, NULL, false, 0) != expected)
		elog(ERROR, "retries: could not settle a copied database: %s", sql);
	return SPI_processed;
}

/*
 * ... and for schedules, not paused by a settling before, which dates them
 * from the copy: one that its role resumed here is its own
 */
#define COPIED_SCHEDULES \
	" FROM retries.schedule_data WHERE NOT paused" \
	" AND created_at OPERATOR(pg_catalog.<) $2"

/*
 * returned_ids -- the ids the last statement returned, in the caller's
 * memory, and how many
 */
static int64 *
returned_ids(int *n)
{
	int64	   *ids = palloc(sizeof(int64) * Max(SPI_processed, 1));
	bool		isnull;

	for (uint64 i = 0; i < SPI_processed; i++)
		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
											 &isnull));
	*n = (int) SPI_processed;
	return ids;
}

/*
 * settled_here -- the LIKE pattern of the message of a call that a settling
 * of this database cancelled (see NOT_SETTLED), as a text
 */
static Datum
settled_here(void)
{
	return CStringGetTextDatum(psprintf("copied with database %u (%%", MyDatabaseId));
}

/* Why a copy's calls are cancelled, for tables_cancel_copied_call() */
static char *copied_why = NULL;

/*
 * tables_settle_copy -- if this database is a copy (see the top), settle
 * it: cancel the scheduled calls and pause the schedules it brought, and
 * make it its own.  Inside SPI, as the extension's owner, at the
 * database's version of the extension, before the workers run anything.
 *
 * Rows that another transaction holds locked are left, not waited for: an
 * open or prepared transaction of any role that may lock one (a cancel()
 * of her own copied call, a pause() of her function's calls) would keep
 * the copy's workers from running anything as long as she liked (the
 * ninth hostile review).  Such a row cannot be claimed or fired while it
 * is locked; the workers serve, and keep the copy unsettled (retries.home
 * and the note as they are), so that every worker cancels such a call when
 * it claims it (tables_cancel_copied_call), fires no such schedule, and
 * tries again later.  Returns 0 once the copy is settled, or if it is not
 * one; else when it was made, which the workers pass over.  The calls it
 * cancelled: *cancelled_ids (palloc'd), *ncancelled, for the caller to
 * finish (their followers cancelled: chains.c).
 */
TimestampTz
tables_settle_copy(RetriesSchemaVersion version, int64 **cancelled_ids, int *ncancelled)
{
	TimestampTz made_at = 0;
	Oid			template = made_from(&made_at);
	bool		noted = OidIsValid(template);
	Oid			home = home_of(version);
	Datum		values[SETTLE_NARGS];
	uint64		cancelled;
	uint64		paused = 0;
	uint64		left;
	MemoryContext oldcxt;

	*ncancelled = 0;

	/*
	 * retries.home names this database (from 1.7): it was made its own since
	 * its note was written (a restore: tables_restored_here), and the note is
	 * stale
	 */
	if (noted && version >= SCHEMA_1_7 && !OidIsValid(home))
		return 0;
	if (!noted)
	{
		template = home;
		made_at = database_made_at();
	}
	if (!OidIsValid(template))
		return 0;
	values[0] = Int64GetDatum(0);
	values[1] = TimestampTzGetDatum(made_at);
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	if (copied_why != NULL)
		pfree(copied_why);
	copied_why = psprintf("copied with database %u (\"%s\") from database %u (CREATE DATABASE ... TEMPLATE), and not run here: retries.retry_now() runs it",
						  MyDatabaseId, get_database_name(MyDatabaseId), template);
	MemoryContextSwitchTo(oldcxt);
	values[2] = CStringGetTextDatum(copied_why);
	values[3] = settled_here();

	cancelled = calls_cancel_copied(false, version, values);
	*cancelled_ids = returned_ids(ncancelled);
	if (version >= SCHEMA_1_2)
	{
		paused = settle("UPDATE retries.schedule_data SET paused = true, created_at = $2"
						" WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id" COPIED_SCHEDULES
						" FOR UPDATE SKIP LOCKED))",
						SPI_OK_UPDATE, values);
		left = settle("SELECT FROM (SELECT" COPIED_CALLS " LIMIT 1) c"
					  " UNION ALL SELECT FROM (SELECT" COPIED_SCHEDULES " LIMIT 1) s",
					  SPI_OK_SELECT, values);
	}
	else
		left = settle("SELECT" COPIED_CALLS " LIMIT 1", SPI_OK_SELECT, values);
	if (cancelled > 0 || paused > 0)
		ereport(LOG,
				(errmsg("retries: database \"%s\" is a copy of database %u, made with CREATE DATABASE ... TEMPLATE: the " UINT64_FORMAT " scheduled calls it brought are cancelled, and its " UINT64_FORMAT " schedules paused",
						get_database_name(MyDatabaseId), template, cancelled, paused),
				 errdetail("Their roles made them to run in the other database, whose settings and owner were not this one's."),
				 errhint("retries.retry_now() of a call runs it here, and retries.resume_schedule() resumes a schedule.")));
	if (left > 0)
	{
		/*
		 * Left to settle later: from now on dated by a note, which nothing
		 * but this writes, not by PG_VERSION, which a move to another
		 * tablespace, a base backup or a crash's redo writes again (the tenth
		 * hostile review: every call made since was taken for a copied one)
		 */
		if (!noted)
			tables_note_made_database(MyDatabaseId, template, made_at);
		return made_at;
	}
	values[0] = Int64GetDatum((int64) MyDatabaseId);
	if (version >= SCHEMA_1_7)
		settle("UPDATE retries.home SET datid = $1::pg_catalog.oid", SPI_OK_UPDATE, values);
	return 0;
}

/*
 * tables_cancel_copied_call -- a worker has claimed call 'id' (its row is
 * locked) in a copy not yet settled, made at 'made_at': if the copy brought
 * it, cancel it, saying why, and return true (see tables_settle_copy)
 */
bool
tables_cancel_copied_call(int64 id, TimestampTz made_at)
{
	Datum		values[SETTLE_NARGS] = {Int64GetDatum(id), TimestampTzGetDatum(made_at),
		CStringGetTextDatum(copied_why != NULL ? copied_why : "copied"),
	settled_here()};

	return calls_cancel_copied(true, schema_retries_version(), values) > 0;
}
