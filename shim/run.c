/* SPDX-License-Identifier: MIT */
/*
 * jitcache-run [--check] [--by-path] [-q] [--] COMMAND ARGS...
 *
 * Runs COMMAND with libjitcache-nvrtc in LD_PRELOAD, so that every load of
 * libnvrtc.so.<major> by soname (DT_NEEDED, dlopen("libnvrtc.so.13"),
 * cuda-pathfinder's already-loaded check) resolves to the shim (and, with
 * --by-path, loads by absolute path too: shim/audit.c), after making
 * sure a jitcached answers (the client library's connect: search order and
 * auto-start are its own; COMMAND gets that daemon's socket in
 * JITCACHE_SOCKET). Afterwards one line on stderr sums up the NVRTC compiles
 * of COMMAND and its children (none when nothing compiled; -q: never);
 * --check says more, and when no compile reached the daemon, what to do.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "jitcache/jitcache.h"
#include "shim_config.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: jitcache-run [--check] [--by-path] [-q] [--] COMMAND [ARGS...]\n"
		   "Runs COMMAND with its NVRTC compiles served by jitcached (LD_PRELOAD of\n"
		   "libjitcache-nvrtc, SONAME " JC_SHIM_SONAME "); afterwards one line on\n"
		   "stderr sums up its compiles (none when it compiled nothing).\n"
		   "  --check    a fuller report: why compiles passed through, and when none\n"
		   "             reached the daemon, the likely cause and its fix; exit 1 when\n"
		   "             none did (else COMMAND's status)\n"
		   "  --by-path  also serve programs that open libnvrtc by absolute path\n"
		   "             (LD_AUDIT of libjitcache-audit, beside the shim), compiling\n"
		   "             with the library they opened (one per process: another\n"
		   "             path is opened as it is, uncached)\n"
		   "  -q, --quiet  no summary line\n"
		   "Environment: JITCACHE_SOCKET (the daemon), JITCACHE_REAL_NVRTC (the real\n"
		   "library, absolute path; default " JC_REAL_NVRTC ").\n");
}

/* The shim beside this executable (build tree), else the installed one. */
static int find_shim(char *out, size_t len)
{
	if (jc__beside_self("libjitcache-nvrtc.so", out, len) == 0)
		return 0;
	snprintf(out, len, "%s", JC_SHIM_INSTALLED);
	return access(out, R_OK);
}

/* Appends lib to the list in variable var (':'-separated): libraries already
 * preloaded keep their place (a sanitizer runtime must stay first); the
 * shim's soname resolves to it wherever it is in the list. */
static int append_env(const char *var, const char *lib)
{
	const char *old = getenv(var);
	size_t len = strlen(lib) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(len);
	if (!v)
		return -1;
	snprintf(v, len, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", lib);
	int rc = setenv(var, v, 1);
	free(v);
	return rc;
}

/* 1 when the executable COMMAND runs (searched on $PATH) has NVRTC linked in
 * statically: its code names nvrtcCompileProgram but it needs no libnvrtc. */
static int static_nvrtc(const char *command)
{
	char path[PATH_MAX] = "";
	if (strchr(command, '/'))
		snprintf(path, sizeof(path), "%s", command);
	for (const char *p = getenv("PATH"); !path[0] && p && *p;) {
		size_t n = strcspn(p, ":");
		snprintf(path, sizeof(path), "%.*s/%s", (int)n, p, command);
		if (access(path, X_OK) != 0)
			path[0] = '\0';
		p += n + (p[n] == ':');
	}
	FILE *f = path[0] ? fopen(path, "rb") : NULL;
	if (!f)
		return 0;
	static const char sym[] = "nvrtcCompileProgram", lib[] = "libnvrtc.so";
	char buf[1 << 16];
	int has_sym = 0, needs_lib = 0;
	size_t keep = 0, n;
	/* chunks overlapping by a name's length, so that none is cut in two */
	while ((n = fread(buf + keep, 1, sizeof(buf) - keep, f)) > 0) {
		n += keep;
		has_sym |= memmem(buf, n, sym, sizeof(sym) - 1) != NULL;
		needs_lib |= memmem(buf, n, lib, sizeof(lib) - 1) != NULL;
		keep = sizeof(sym);
		memmove(buf, buf + n - keep, keep);
	}
	fclose(f);
	return has_sym && !needs_lib;
}

/* Sums the report lines (shim.c: shim_report) and prints the summary line:
 * nothing when nothing compiled, unless check; with check the reasons and,
 * when no compile reached the daemon, the likely cause and its fix (daemon:
 * what finding the daemon at the start said, "" when it was found). Returns
 * 1 when check and none reached the daemon, else 0. */
static int report(const char *path, int check, int by_path, const char *command, const char *daemon)
{
	FILE *f = fopen(path, "r");
	unsigned long procs = 0, compiles = 0, hits = 0, misses = 0, joined = 0, pass = 0,
		      unavail = 0, refused = 0, failed = 0;
	char line[1024], reason[1024] = "";
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long v[9];
		char why[512] = "";
		if (sscanf(
			line,
			"pid=%*[0-9] compiles=%lu hits=%lu misses=%lu joined=%lu lazy=%*[0-9] "
			"passthrough=%lu unavailable=%lu refused=%lu failed=%lu materialised=%lu "
			"reason=%511[^\n]",
			&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], why) < 9)
			continue;
		procs++;
		compiles += v[0], hits += v[1], misses += v[2], joined += v[3], pass += v[4];
		unavail += v[5], refused += v[6], failed += v[7];
		size_t len = strlen(reason);
		if (strcmp(why, "-") != 0 && !strstr(reason, why) &&
		    len + strlen(why) + 3 < sizeof(reason))
			snprintf(reason + len, sizeof(reason) - len, "%s%s", len ? "; " : "", why);
	}
	if (f)
		fclose(f);
	unsigned long reached = hits + misses + joined;
	if (!check) {
		if (compiles)
			fprintf(stderr,
				"jitcache-run: %lu NVRTC compile%s: %lu from jitcached (%lu hit, "
				"%lu miss, "
				"%lu joined), %lu passed through, %lu compiled in process\n",
				compiles, compiles == 1 ? "" : "s", reached, hits, misses, joined,
				pass, unavail + refused + failed);
		return 0;
	}
	if (!procs) {
		fprintf(stderr, "jitcache-run: no NVRTC compile went through the shim\n");
		if (static_nvrtc(command))
			fprintf(stderr,
				"jitcache-run: fix: %s has NVRTC linked in statically "
				"(libnvrtc_static.a), which no shim reaches: link it with -lnvrtc, "
				"or compile through libjitcache-client (jitcache.h)\n",
				command);
		else if (!by_path)
			fprintf(
			    stderr,
			    "jitcache-run: fix: if %s opens libnvrtc by absolute path "
			    "(ctypes.CDLL of a path, a wheel's nvidia/cu13/lib), run it with "
			    "--by-path; else it compiled nothing (jitcache-run(1), docs/shim.md)\n",
			    command);
		else
			fprintf(stderr,
				"jitcache-run: %s compiled nothing, or loads NVRTC in a way "
				"neither LD_PRELOAD nor LD_AUDIT reaches (docs/shim.md)\n",
				command);
		return 1;
	}
	fprintf(
	    stderr,
	    "jitcache-run: %lu process%s, %lu compile%s: %lu reached jitcached (%lu hit, %lu miss, "
	    "%lu joined); %lu passed through, %lu compiled in process (daemon unavailable %lu, "
	    "refused %lu, compile error %lu)%s%s\n",
	    procs, procs == 1 ? "" : "es", compiles, compiles == 1 ? "" : "s", reached, hits,
	    misses, joined, pass, unavail + refused + failed, unavail, refused, failed,
	    reason[0] ? "; why: " : "", reason);
	if (reached || !compiles)
		return reached ? 0 : 1;
	if (daemon[0] || unavail)
		fprintf(stderr,
			"jitcache-run: fix: no daemon of yours served it%s%s: start one "
			"(jitcached), or point JITCACHE_SOCKET at a team daemon whose user "
			"owns the socket's directory (a daemon of another user is refused)\n",
			daemon[0] ? ": " : "", daemon);
	else if (refused)
		fprintf(stderr,
			"jitcache-run: fix: the daemon refused the requests (see why above)\n");
	else if (pass)
		fprintf(stderr, "jitcache-run: fix: every compile passed through to the real NVRTC "
				"(see why above; docs/shim.md lists what passes through)\n");
	return 1;
}

int main(int argc, char **argv)
{
	int check = 0, by_path = 0, quiet = 0, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "--check")) {
			check = 1;
		} else if (!strcmp(argv[i], "--by-path")) {
			by_path = 1;
		} else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			quiet = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "jitcache-run: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	char shim[PATH_MAX];
	if (find_shim(shim, sizeof(shim)) != 0) {
		fprintf(
		    stderr,
		    "jitcache-run: libjitcache-nvrtc.so not found (beside this program or at %s)\n",
		    JC_SHIM_INSTALLED);
		return 127;
	}
	/* Finds the daemon as every client does, starting one if none answers
	 * (jitcache.h, jc_client_open), and waiting for it as long as a client
	 * without a fallback would (30 s, not a compile's 1 s); COMMAND then
	 * talks to that one. */
	jc_client *c = NULL;
	jc_options *o = NULL;
	char daemon[600] = "";
	if (jc_options_new(&o) != 0 || jc_options_set_fallback(o, JC_FALLBACK_ERROR) != 0 ||
	    jc_client_open(o, &c) != 0)
		snprintf(daemon, sizeof(daemon), "%s",
			 o ? jc_client_errmsg(NULL) : "out of memory");
	if (daemon[0])
		fprintf(stderr, "jitcache-run: %s: compiles will run in process, uncached\n",
			daemon);
	else if (setenv("JITCACHE_SOCKET", jc_client_socket(c), 1) != 0)
		fprintf(stderr, "jitcache-run: cannot set JITCACHE_SOCKET: %s\n", strerror(errno));
	jc_client_close(c);
	jc_options_free(o);
	char audit[PATH_MAX + 32];
	snprintf(audit, sizeof(audit), "%.*s/libjitcache-audit.so",
		 (int)(strrchr(shim, '/') - shim), shim);
	if (by_path && access(audit, R_OK) != 0) {
		fprintf(stderr, "jitcache-run: %s: %s\n", audit, strerror(errno));
		return 127;
	}
	if (append_env("LD_PRELOAD", shim) != 0 ||
	    (by_path && append_env("LD_AUDIT", audit) != 0)) {
		fprintf(stderr, "jitcache-run: cannot set LD_PRELOAD: %s\n", strerror(errno));
		return 127;
	}
	if (quiet && !check) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "jitcache-run: %s: %s\n", argv[i], strerror(errno));
		return errno == ENOENT ? 127 : 126;
	}
	char path[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/jitcache-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "jitcache-run: cannot create a report file in %s: %s\n",
			tmp && *tmp ? tmp : "/tmp", strerror(errno));
		return 127;
	}
	close(fd);
	setenv("JITCACHE_RUN_REPORT", path, 1);
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "jitcache-run: %s: %s\n", argv[i], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	int status = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int verdict = report(path, check, by_path, argv[i], daemon);
	unlink(path);
	if (pid < 0)
		return 127;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return code ? code : verdict;
}
