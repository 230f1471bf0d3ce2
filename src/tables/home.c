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
 * paused (resume_schedule()), and retries.home takes the copy's OID.  The
 * calls and schedules made in the copy itself run as anywhere.  The
 * database was made when its PG_VERSION file was written, by either
 * strategy of CREATE DATABASE.  (An earlier design held the whole copy until
 * a superuser adopted it: a call that any role made in a template kept
 * with the extension in it held every database made from it, the eighth
 * hostile review.)
 *
 * IDENTIFICATION
 *	  src/tables/home.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "common/relpath.h"
#include "utils/builtins.h"
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
 * tables_settle_copy -- if this database is a copy (see the top), settle
 * it: cancel the scheduled calls and pause the schedules it brought, and
 * make it its own.  Inside SPI, as the extension's owner, at version 1.7
 * or later, before the workers run anything.
 */
void
tables_settle_copy(void)
{
	static SPIPlanPtr home_plan = NULL;
	static SPIPlanPtr cancel_plan = NULL;
	static SPIPlanPtr pause_plan = NULL;
	static SPIPlanPtr own_plan = NULL;
	Oid			argtypes[3] = {OIDOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[3] = {ObjectIdGetDatum(MyDatabaseId), TimestampTzGetDatum(database_made_at()),
	(Datum) 0};
	bool		isnull;
	Oid			home;
	uint64		cancelled;
	uint64		paused;

	/* one worker settles it: the others wait here, and find it done */
	plans_prepare_kept(&home_plan,
					   "SELECT datid FROM retries.home WHERE datid OPERATOR(pg_catalog.<>) $1"
					   " FOR UPDATE",
					   1, argtypes);
	if (SPI_execute_plan(home_plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read retries.home");
	if (SPI_processed == 0)
		return;
	home = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	values[2] = CStringGetTextDatum(psprintf("copied with database \"%s\" from database %u (CREATE DATABASE ... TEMPLATE), and not run here: retries.retry_now() runs it",
											 get_database_name(MyDatabaseId), home));

	plans_prepare_kept(&cancel_plan,
					   "UPDATE retries.call_data SET state = 'cancelled', held = false,"
					   " last_message = $3, updated_at = pg_catalog.now()"
					   " WHERE state OPERATOR(pg_catalog.=) 'scheduled'"
					   " AND created_at OPERATOR(pg_catalog.<) $2",
					   3, argtypes);
	if (SPI_execute_plan(cancel_plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not cancel the calls of a copied database");
	cancelled = SPI_processed;
	plans_prepare_kept(&pause_plan,
					   "UPDATE retries.schedule_data SET paused = true"
					   " WHERE NOT paused AND created_at OPERATOR(pg_catalog.<) $2",
					   3, argtypes);
	if (SPI_execute_plan(pause_plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not pause the schedules of a copied database");
	paused = SPI_processed;
	plans_prepare_kept(&own_plan, "UPDATE retries.home SET datid = $1", 3, argtypes);
	if (SPI_execute_plan(own_plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not write retries.home");
	if (cancelled > 0 || paused > 0)
		ereport(LOG,
				(errmsg("retries: database \"%s\" is a copy of database %u, made with CREATE DATABASE ... TEMPLATE: the " UINT64_FORMAT " scheduled calls it brought are cancelled, and its " UINT64_FORMAT " schedules paused",
						get_database_name(MyDatabaseId), home, cancelled, paused),
				 errdetail("Their roles made them to run in the other database, whose settings and owner were not this one's."),
				 errhint("retries.retry_now() of a call runs it here, and retries.resume_schedule() resumes a schedule.")));
}
