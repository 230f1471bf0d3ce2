/*
 * sanitizer_preload.c
 *		A small library that scripts/sanitize preloads into the server with
 *		the ASan and UBSan runtimes, to work around two ways in which those
 *		runtimes and PostgreSQL (as Debian 12 ships it) get in each other's
 *		way.  It is not part of the extension.
 *
 * 1. An empty swift_demangle().  With the ASan runtime in LD_PRELOAD,
 *    `postgres -V` (and so initdb) hangs for ever on Debian 12 (gcc 12's
 *    libasan, glibc 2.36).  Debian's postgres links libgpg-error (through
 *    libldap and gnutls), whose library constructor calls bindtextdomain()
 *    before ASan's own constructor has run.  bindtextdomain() calls malloc()
 *    while it holds glibc's gettext lock; the intercepted malloc() starts
 *    ASan there, and ASan's start-up looks swift_demangle up with dlsym(),
 *    then calls dlerror() to clear the failure.  dlerror() translates its
 *    message with gettext, which takes and releases the same lock as a
 *    reader inside the writer's critical section; the lock's counts go
 *    wrong, and the next bindtextdomain() (PostgreSQL's own, in main())
 *    waits for ever.  With this symbol preloaded the lookup succeeds and
 *    dlerror() has no message to translate.  ASan calls swift_demangle()
 *    only for names that look like mangled Swift ones; NULL means "not
 *    demangled".
 *
 * 2. UBSAN_OPTIONS kept for UBSan.  UBSan starts when it first reports,
 *    and reads its options then, from /proc/self/environ: the memory the
 *    kernel put the environment in.  By then PostgreSQL has moved its
 *    environment elsewhere and written its ps display over that memory
 *    (set_ps_display), so UBSan would see no options: no stack trace,
 *    exit(1) instead of abort().  The constructor below copies
 *    UBSAN_OPTIONS at process start, and __ubsan_default_options() hands
 *    the copy to UBSan as its defaults.  (ASan starts with the process and
 *    reads ASAN_OPTIONS before anything is overwritten.)  This library must
 *    come before libubsan in LD_PRELOAD for its __ubsan_default_options()
 *    to win over libubsan's own weak one.
 *
 * 3. UBSan's log_path.  With libasan loaded too, UBSan's start-up passes
 *    its log_path to __sanitizer_set_report_path(), which both runtimes
 *    export, and the dynamic linker binds the call to libasan's: UBSan's
 *    own reports stay on stderr (the server log).  The constructor calls
 *    libubsan's own __sanitizer_set_report_path() with the log_path of
 *    UBSAN_OPTIONS.  (scripts/sanitize also searches the server logs for
 *    sanitizer reports, in case one still lands there.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char	   *swift_demangle(const char *mangled, size_t mangled_len,
						   char *out, size_t *out_len, uint32_t flags);
const char *__ubsan_default_options(void);

static char ubsan_options[4096];

/*
 * swift_demangle: demangle nothing.
 */
char *
swift_demangle(const char *mangled, size_t mangled_len,
			   char *out, size_t *out_len, uint32_t flags)
{
	return NULL;
}

/*
 * set_ubsan_log_path: point libubsan's own report file at the log_path of
 * OPTIONS, if it has one.
 */
static void
set_ubsan_log_path(const char *options)
{
	static char path[4096];
	const char *start = strstr(options, "log_path=");
	size_t		len;
	void	   *ubsan;
	void		(*set_report_path) (const char *);

	if (start == NULL)
		return;
	start += strlen("log_path=");
	len = strcspn(start, ":");
	if (len == 0 || len >= sizeof(path))
		return;
	memcpy(path, start, len);
	path[len] = '\0';

	ubsan = dlopen("libubsan.so.1", RTLD_NOLOAD | RTLD_LAZY);
	if (ubsan == NULL)
		return;
	set_report_path = (void (*) (const char *))
		dlsym(ubsan, "__sanitizer_set_report_path");
	if (set_report_path != NULL)
		set_report_path(path);
}

/*
 * save_ubsan_options: copy UBSAN_OPTIONS while the environment is intact,
 * and send UBSan's reports where its log_path says.
 */
static void
__attribute__((constructor))
save_ubsan_options(void)
{
	const char *options = getenv("UBSAN_OPTIONS");

	if (options == NULL || strlen(options) >= sizeof(ubsan_options))
		return;
	strcpy(ubsan_options, options);
	set_ubsan_log_path(options);
}

/*
 * __ubsan_default_options: the options UBSan starts with.
 */
const char *
__ubsan_default_options(void)
{
	return ubsan_options;
}
