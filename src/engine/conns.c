/*-------------------------------------------------------------------------
 *
 * conns.c
 *	  The connections that dblink keeps in the worker's process, closed when
 *	  the worker goes on to another context of calls.
 *
 * dblink keeps its connections, named (dblink_connect('name', ...)) and the
 * unnamed one (dblink_connect('connstr')), in the memory of the process, as
 * long as the process, whoever opened them.  In a worker that runs the
 * calls of many roles, a connection that alice's function opened, and did
 * not close (the attempt's time limit cancelled it between its connect and
 * its disconnect: a cancel cannot be trapped, so no handler of hers ran),
 * was there for mallory's next attempt in that worker, authenticated as
 * alice: mallory read alice's table through it (the thirty-first hostile
 * review).  The other way, a connection mallory left under a name alice's
 * code uses would have received alice's work.
 *
 * So, at each change of context of calls (sandbox_enter: another role, or
 * code of another owner), every connection dblink holds is closed, through
 * dblink's own functions, found in the process (dlsym) if its library is
 * loaded: the extension does not link against dblink nor need it.  Within
 * one context a connection stays, as in a session (doc/operations.md,
 * "Containment").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "engine/conns.h"

/*
 * call_dblink -- call dblink's function 'fn' with no argument, or with the
 * text 'name'; its result, or 0 with *isnull set
 */
static Datum
call_dblink(PGFunction fn, text *name, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, name != NULL ? 1 : 0, InvalidOid, NULL, NULL);
	if (name != NULL)
	{
		fcinfo->args[0].value = PointerGetDatum(name);
		fcinfo->args[0].isnull = false;
	}
	result = fn(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

/*
 * close_unnamed -- close dblink's unnamed connection, if it has one: its
 * dblink_disconnect() raises an error if not, which a subtransaction of
 * its own takes back
 */
static void
close_unnamed(PGFunction disconnect)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	bool		isnull;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		(void) call_dblink(disconnect, NULL, &isnull);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
}

/*
 * conns_forget_all -- close every connection dblink holds in this process,
 * if its library is loaded.  Inside a transaction.
 *
 * dblink's functions are looked for until found, then kept: a library once
 * loaded stays for the life of the process.
 */
void
conns_forget_all(void)
{
	static PGFunction list = NULL;
	static PGFunction disconnect = NULL;
	bool		isnull;
	Datum		names;

	if (list == NULL || disconnect == NULL)
	{
		list = (PGFunction) dlsym(RTLD_DEFAULT, "dblink_get_connections");
		disconnect = (PGFunction) dlsym(RTLD_DEFAULT, "dblink_disconnect");
		if (list == NULL || disconnect == NULL)
			return;
	}
	names = call_dblink(list, NULL, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		for (int i = 0; i < n; i++)
			if (!nulls[i])
				(void) call_dblink(disconnect, DatumGetTextPP(elems[i]), &isnull);
	}
	close_unnamed(disconnect);
}
