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
 * workers of a copy that holds scheduled calls or schedules run none of
 * them, and fire nothing, until a superuser runs retries.adopt_copy() in
 * it; a copy that holds none (a template made for new databases, with the
 * extension in it) is adopted at once.  Only the calls and schedules made
 * before the database count: those the copy brought.  Any role that may
 * connect could otherwise make one in a new database before its workers
 * first look, and keep it from being adopted (the eighth hostile review).
 * The database was made when its PG_VERSION file was written, by either
 * strategy of CREATE DATABASE.
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
 * tables_unadopted_copy -- is this database a copy whose calls may not run
 * yet (see the top)?  Adopts a copy that holds nothing to run.  Inside SPI,
 * as the extension's owner, at version 1.7 or later.
 */
bool
tables_unadopted_copy(void)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr adopt_plan = NULL;
	static bool warned = false;
	Oid			argtypes[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2] = {ObjectIdGetDatum(MyDatabaseId), TimestampTzGetDatum(database_made_at())};
	bool		isnull;
	Oid			home;
	int64		calls;
	int64		schedules;

	plans_prepare_kept(&plan,
					   "SELECT h.datid,"
					   " (SELECT pg_catalog.count(*) FROM retries.call_data"
					   "  WHERE state OPERATOR(pg_catalog.=) 'scheduled'"
					   "  AND created_at OPERATOR(pg_catalog.<) $2),"
					   " (SELECT pg_catalog.count(*) FROM retries.schedule_data"
					   "  WHERE created_at OPERATOR(pg_catalog.<) $2)"
					   " FROM retries.home h WHERE h.datid OPERATOR(pg_catalog.<>) $1",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read retries.home");
	if (SPI_processed == 0)
		return false;
	home = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	calls = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
										&isnull));
	schedules = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
											&isnull));
	if (calls == 0 && schedules == 0)
	{
		plans_prepare_kept(&adopt_plan, "UPDATE retries.home SET datid = $1", 1, argtypes);
		if (SPI_execute_plan(adopt_plan, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "retries: could not write retries.home");
		return false;
	}
	if (!warned)
		ereport(WARNING,
				(errmsg("retries: database \"%s\" is a copy of database %u, made with CREATE DATABASE ... TEMPLATE: its calls and schedules do not run, " INT64_FORMAT " scheduled calls and " INT64_FORMAT " schedules of them made before the copy",
						get_database_name(MyDatabaseId), home, calls, schedules),
				 errdetail("Their roles made them to run in the other database, whose settings and owner were not this one's."),
				 errhint("A superuser runs SELECT retries.adopt_copy() in it to run them, or cancels them.")));
	warned = true;
	return true;
}
