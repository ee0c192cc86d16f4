/* SPDX-License-Identifier: MIT */
/*
 * What libjitcache-nvrtc keeps per process (shim.h): the counters and the
 * report for jitcache-run --check, the pool of client handles through which
 * a request reaches jitcached (jc__shim_ask), what a fork does to both, and
 * jitcache's own programs, which shed the shim or leave it inert. The
 * program handles and the NVRTC API are shim.c's.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "shim/real.h"
#include "shim/shim.h"

#define POOL_MAX 32

/* ---- counters ---------------------------------------------------------------- */

/* Their names in the report, in enum jc_shim_counter's order. */
static const char *const counter_names[JC_SHIM_N_COUNTERS] = {
    "compiles",	   "hits",	  "misses",  "joined", "lazy",
    "passthrough", "unavailable", "refused", "failed", "materialised",
};

static struct {
	unsigned long n[JC_SHIM_N_COUNTERS];
	char reason[512]; /* the distinct pass-through / fallback reasons, "; "-separated */
} stats;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;

void jc__shim_count(enum jc_shim_counter ctr, const char *reason)
{
	pthread_mutex_lock(&stats_mu);
	stats.n[ctr]++;
	size_t len = strlen(stats.reason);
	if (reason && !strstr(stats.reason, reason) &&
	    len + strlen(reason) + 3 < sizeof(stats.reason))
		snprintf(stats.reason + len, sizeof(stats.reason) - len, "%s%s", len ? "; " : "",
			 reason);
	pthread_mutex_unlock(&stats_mu);
}

/* Nonzero while this thread is inside the client library. Its in-process
 * fallback is given the real library's path (pool_get); should anything in
 * there still reach NVRTC by soname, that is this library, and the call must
 * go to the real one. */
static __thread int in_client;

/* ---- connections ---------------------------------------------------------- */

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static jc_client *pool[POOL_MAX];
static int n_pool;

/* The client library's first warning of this process (a bad
 * $JITCACHE_FALLBACK, the first in-process fallback) on stderr, the
 * application's; the rest are dropped: the application did not ask for them. */
static void shim_warn(void *ctx, int level, const char *message)
{
	static int said;
	(void)ctx;
	if (level == JC_LOG_WARNING && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "libjitcache-nvrtc: %s\n", message);
}

/*
 * A pooled handle, else a new one from jc_client_open(): the client library
 * finds the daemon (or starts one) and reconnects; with no daemon its
 * in-process fallback compiles with the same real library as the shim
 * (JC_UNCACHED results), and such a handle looks for a daemon again before
 * each compile. $JITCACHE_FALLBACK=error makes the shim compile through the
 * real program instead.
 */
static jc_client *pool_get(void)
{
	jc_client *c = NULL;
	pthread_mutex_lock(&pool_mu);
	if (n_pool > 0)
		c = pool[--n_pool];
	pthread_mutex_unlock(&pool_mu);
	if (c)
		return c;
	jc_options *o = NULL;
	if (jc_options_new(&o) == 0 && jc_options_set_nvrtc(o, jc__real_path()) == 0 &&
	    jc_options_set_log(o, shim_warn, NULL) == 0 && jc_client_open(o, &c) != 0)
		c = NULL;
	jc_options_free(o);
	return c;
}

/* ok = 0: the connection may be broken, close it. */
static void pool_put(jc_client *c, int ok)
{
	if (ok) {
		pthread_mutex_lock(&pool_mu);
		if (n_pool < POOL_MAX) {
			pool[n_pool++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&pool_mu);
	}
	jc_client_close(c);
}

/* A child must not share its parent's connections (answers would cross). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&pool_mu);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&pool_mu);
}

static void atfork_child(void)
{
	while (n_pool > 0)
		jc_client_close(pool[--n_pool]);
	pthread_mutex_unlock(&pool_mu);
	/* The child reports its own compiles only (the parent reports its own). */
	memset(&stats, 0, sizeof(stats));
	pthread_mutex_init(&stats_mu, NULL);
}

/* ---- jitcache's own programs ------------------------------------------------- */

/* Set in jitcache's own programs when they could not shed the shim: every
 * call goes to the real library. */
static int inert;

/* Removes from the ':'/' '-separated list in var the entries match() names;
 * returns 1 when it removed one. */
static int drop_entries(const char *var, int (*match)(const char *entry, const void *ctx),
			const void *ctx)
{
	const char *v = getenv(var);
	if (!v)
		return 0;
	char *copy = strdup(v), *out = calloc(1, strlen(v) + 1), *save = NULL;
	int dropped = 0;
	for (char *e = copy ? strtok_r(copy, ": ", &save) : NULL; e;
	     e = strtok_r(NULL, ": ", &save)) {
		if (match(e, ctx)) {
			dropped = 1;
			continue;
		}
		if (*out)
			strcat(out, ":");
		strcat(out, e);
	}
	if (dropped && out)
		*out ? setenv(var, out, 1) : unsetenv(var);
	free(copy);
	free(out);
	return dropped && out;
}

static int is_file(const char *entry, const void *path)
{
	char real[PATH_MAX];
	return realpath(entry, real) && strcmp(real, path) == 0;
}

static int is_audit(const char *entry, const void *unused)
{
	const char *slash = strrchr(entry, '/');
	(void)unused;
	return strcmp(slash ? slash + 1 : entry, "libjitcache-audit.so") == 0;
}

/*
 * jitcached, its workers and jitcachectl must never run with the shim: a
 * daemon started by the client library from a process under the shim
 * inherits LD_PRELOAD, its workers' NVRTC would be this library (asking
 * that very daemon, which waits on them) and its toolchain identity would be
 * the shim's. Such a process sheds the shim from LD_PRELOAD and LD_AUDIT and
 * executes itself again (glibc passes argv to constructors); if it cannot,
 * the shim stays inert in it.
 */
static void shed_in_own_programs(char **argv)
{
	char exe[PATH_MAX], self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	if (strcmp(base, "jitcached") && strcmp(base, "jitcache-worker") &&
	    strcmp(base, "jitcachectl"))
		return;
	inert = 1;
	Dl_info info;
	if (!dladdr((void *)shed_in_own_programs, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self))
		return;
	int dropped = drop_entries("LD_PRELOAD", is_file, self);
	dropped |= drop_entries("LD_AUDIT", is_audit, NULL);
	if (dropped && argv && argv[0])
		execv(exe, argv); /* returns only on failure: stay inert */
}

__attribute__((constructor)) static void shim_init(int argc, char **argv, char **envp)
{
	(void)argc, (void)envp;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	shed_in_own_programs(argv);
}

int jc__shim_bypass(void)
{
	return in_client || inert;
}

/* ---- the report for jitcache-run --check ------------------------------------ */

/* One line per process that compiled, appended (O_APPEND: lines of several
 * processes never interleave). Format: space-separated key=value, reason last. */
__attribute__((destructor)) static void shim_report(void)
{
	const char *path = getenv("JITCACHE_RUN_REPORT");
	if (!path || !*path || !stats.n[JC_SHIM_COMPILES])
		return;
	char line[1024];
	size_t n = (size_t)snprintf(line, sizeof(line), "pid=%ld", (long)getpid());
	for (int i = 0; i < JC_SHIM_N_COUNTERS && n < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%lu", counter_names[i],
				      stats.n[i]);
	if (n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n, " reason=%s\n",
				      stats.reason[0] ? stats.reason : "-");
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, n < sizeof(line) ? n : sizeof(line) - 1);
	(void)w;
	close(fd);
}

int jc__shim_ask(const jc_request *r, jc_result **out)
{
	*out = NULL;
	in_client++;
	jc_client *c = pool_get();
	int rc = JC_ECONNECT;
	if (c) {
		/* A handle without a daemon compiles in process with the real
		 * library: load it here first, so that its builtins are the
		 * ones beside it (real.h). A daemon lost during this very call
		 * falls back without that (the loader's search path decides). */
		if (!jc_client_socket(c))
			jc__real();
		rc = jc_compile(c, r, out);
		/* A result (even a failed compile) means the connection is sound. */
		pool_put(c, rc == 0 || rc == JC_ECOMPILE || rc == JC_EINVAL || rc == JC_ENOTSUP);
	}
	in_client--;
	if (rc != 0) {
		jc_result_free(*out);
		*out = NULL;
	}
	return rc;
}
