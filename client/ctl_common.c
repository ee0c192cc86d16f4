/* SPDX-License-Identifier: MIT */
/* What jitcachectl's commands share: the help table, messages, the client
 * and the admin round trip (through the daemon, else offline). See ctl.h. */
#include "client/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/doctor.h"
#include "client/inspect.h"
#include "common/includes.h"
#include "common/util.h"
#include "config.h"
#include "core/admin.h"
#include "core/evict.h"

/* An admin command answers in seconds; a purge of 1M entries stays well inside. */
#define ADMIN_TIMEOUT_MS 120000

const char *jc__ctl_socket;
const char *jc__ctl_cache_dir;

/* Each subcommand's usage, for `help SUB`, `SUB --help` and errors: those of
 * jitcachectl here, the daemon's in the admin table (core/admin.c). */
static const struct sub_help {
	const char *name, *text;
} subs[] = {
    {"compile",
     "compile FILE.cu --arch ARCH[,ARCH...] [--output cubin|ptx|ltoir|fatbin] [-o OUT]\n"
     "        [--header NAME=PATH]..."
     "        [--name-expr EXPR]... [--app-abi STR] [--link INPUT]... [--link-option OPT]...\n"
     "        [-- NVRTC_OPTION...]\n"
     "  Compiles through jitcached; prints on stderr one status line (hit, remote-hit,\n"
     "  miss, joined, negative-hit or uncached; the key; this request's total_ms and\n"
     "  server_ms; the entry's compile time as compiled_ms), the compile log when not\n"
     "  empty, and one EXPR<TAB>LOWERED line per --name-expr on stdout.\n"
     "  -o OUT: the artifact's file (written through a device, FIFO or link; a regular\n"
     "  file is replaced atomically); -o - : standard output; default: FILE's stem with\n"
     "  .cubin/.ptx/.ltoir/.fatbin in the working directory. FILE's directory is the first -I.\n"
     "  Without --socket/--cache-dir a daemon is found, or started, or the compile runs\n"
     "  in-process (JITCACHE_AUTOSTART, JITCACHE_FALLBACK: see `jitcachectl config`).\n"
     "  A target list (--arch sm_80,sm_90,compute_90) makes one fatbin of a cubin per\n"
     "  sm_NN and the PTX of each compute_NN, each target also its own entry.\n"},
    {"link",
     "link --arch ARCH [--lto] [--output cubin|ptx] [-o OUT] [--link-option OPT]... INPUT...\n"
     "  Links with nvJitLink in the order given; an INPUT's type comes from its extension\n"
     "  (.ptx .ltoir .cubin .fatbin .o .a) or a TYPE:PATH prefix. -o as for compile\n"
     "  (default a.cubin / a.ptx).\n"},
    {"", NULL}, /* here: the daemon's commands, from the admin table (core/admin.c) */
    {"doctor",
     "doctor\n  The run-time checklist: driver, devices, NVRTC, daemon, cache directory.\n"},
    {"inspect", "inspect FILE | --key KEY [--json]\n"
		"  What a cubin, PTX, LTO-IR or fatbin holds: targets, PTX ISA, kernels with\n"
		"  registers, shared memory, stack and launch bounds; --key: an entry's object.\n"},
    {"config", "config\n  The effective client configuration, and where each value comes from.\n"},
    {"import", "import FILE [--wait] [--secret-file FILE]\n"
	       "  Checks the bundle's signature (refused when it does not match), then compiles\n"
	       "  its requests into this machine's cache (or takes them from the fleet tier),\n"
	       "  in the background; --wait: here, with progress, and a summary.\n"},
    {"help", "help [COMMAND]\n  This text, or COMMAND's.\n"},
};

/* COMMAND's help text: this table's, else the admin table's; NULL for an
 * unknown command. */
const char *jc__ctl_find_sub(const char *name)
{
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (subs[i].text && strcmp(subs[i].name, name) == 0)
			return subs[i].text;
	const struct jc_admin_cmd *cmd = *name ? jc__admin_find(name) : NULL;
	return cmd ? cmd->help : NULL;
}

/* The length of help text t's synopsis: its first line and the lines that
 * continue it (indented deeper than the description's two spaces). */
static int synopsis_len(const char *t)
{
	size_t n = strcspn(t, "\n");
	while (t[n] == '\n' && strncmp(t + n + 1, "   ", 3) == 0)
		n += 1 + strcspn(t + n + 1, "\n");
	return (int)n;
}

void jc__ctl_usage(FILE *f)
{
	fputs("usage: jitcachectl [--socket PATH] [--cache-dir DIR] COMMAND [ARGS]\n"
	      "  --socket PATH    that daemon only (nothing answering: an error, or offline on\n"
	      "                   --cache-dir DIR when given too)\n"
	      "  --cache-dir DIR  the daemon serving DIR (found through DIR), else DIR offline\n"
	      "commands:\n",
	      f);
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		for (size_t k = 0; !subs[i].text && k < jc__admin_n_cmds; k++) {
			const char *t = jc__admin_cmds[k].help;
			fprintf(f, "  %.*s\n", synopsis_len(t), t);
		}
		const char *t = subs[i].text;
		if (t)
			fprintf(f, "  %.*s\n", synopsis_len(t), t);
	}
	fputs("`jitcachectl help COMMAND` or `jitcachectl COMMAND --help`: that command.\n", f);
}

/* COMMAND's usage to f. */
void jc__ctl_sub_usage(FILE *f, const char *name)
{
	const char *h = jc__ctl_find_sub(name);
	if (h)
		fprintf(f, "usage: jitcachectl [--socket PATH] [--cache-dir DIR] %s", h);
	else
		jc__ctl_usage(f);
}

/* The client library's messages (auto-start, the in-process fallback). */
static void log_to_stderr(void *ctx, int level, const char *message)
{
	(void)ctx;
	if (level <= JC_LOG_NOTICE)
		fprintf(stderr, "%s\n", message);
}

int jc__ctl_die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("jitcachectl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

/* compile: 0 an admin command (a running daemon only), 1 a compile (a
 * daemon found or started, else in-process unless a daemon was named), 2 an
 * import (a daemon found or started, never in-process: nothing would be
 * cached). */
int jc__ctl_open_client(int compile, jc_client **c)
{
	jc_options *o = NULL;
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, jc__ctl_socket);
	rc = rc ?: jc_options_set_cache_dir(o, jc__ctl_cache_dir);
	if (rc == 0 && (compile != 1 || jc__ctl_socket || jc__ctl_cache_dir))
		rc = jc_options_set_fallback(o, JC_FALLBACK_ERROR);
	if (rc == 0 && !compile)
		rc = jc_options_set_autostart(o, 0);
	if (rc == 0 && compile)
		rc = jc_options_set_log(o, log_to_stderr, NULL);
	rc = rc ?: jc_client_open(o, c);
	jc_options_free(o);
	return rc;
}

jc_client *jc__ctl_connect_or_die(int *rc)
{
	jc_client *c = NULL;
	*rc = jc__ctl_open_client(1, &c);
	if (*rc != 0)
		jc__ctl_die(1, "%s", jc_client_errmsg(NULL));
	return c;
}

/* --- admin commands: through the daemon, else offline ------------------------------ */

/* Runs req on the directory itself: only while no daemon holds its lock.
 * Returns 0 (out filled), JC_ELOCKED (held: message in err, nothing
 * printed) or 1 (an error, printed). */
static int run_offline(const struct jc_admin_req *req, struct jc_admin_reply *out, char *err,
		       size_t errlen)
{
	char dir[4096];
	struct jc_cachedir *cd = NULL;
	struct jc_toolchain tc;
	struct jc_admin_env env = {.uptime_s = -1};
	if (jc__ctl_cache_dir)
		snprintf(dir, sizeof(dir), "%s", jc__ctl_cache_dir);
	else if (jc__default_cache_dir(dir, sizeof(dir)) != 0)
		return jc__ctl_die(1, "no cache directory: use --cache-dir or set JITCACHE_DIR");
	struct stat st;
	if (stat(dir, &st) != 0)
		return jc__ctl_die(1, "no daemon answers and there is no cache at %s", dir);
	umask(077); /* what is created in the store is ours alone, as the daemon's */
	int rc = jc__cachedir_open(dir, 0, 0, &cd, err, errlen);
	if (rc == JC_ELOCKED)
		return JC_ELOCKED;
	rc = rc ?: jc__toolchain_probe(&tc, err, errlen);
	if (rc == 0) {
		env.cd = cd;
		env.tc = &tc;
		memcpy(env.counters, cd->counters.v, sizeof(env.counters));
		/* Offline is the directory's owner (or root): an admin. */
		env.uid = (uint32_t)getuid();
		env.all_users = 1;
		env.max_size = cd->max_size; /* the last daemon's, else the default */
		env.user_max_size = cd->user_max_size;
		jc__admin_run(&env, req, out);
		/* Written back at close, as the daemon writes its own. */
		jc__count(&cd->counters, JC_CTR_corrupt_objects, env.corrupt);
	} else {
		jc__ctl_die(1, "%s", err);
	}
	jc__cachedir_close(cd);
	return rc ? 1 : 0;
}

/* How long a daemon that is starting (it holds DIR/lock before it listens)
 * or stopping (it drops connections, then the lock) is waited for; the
 * daemon waits as long for the lock at start. */
#define ADMIN_WAIT_MS 2000

/* Sends an admin command, falling back to the directory when allowed. An
 * answer lost to a daemon going away (JC_EIO), a daemon's "shutting down"
 * (JC_EBUSY: a stopping daemon refuses what it can no longer run), or a lock
 * held by a daemon that does not answer yet (JC_ELOCKED) is retried
 * (through the daemon or offline, whichever works first) until
 * ADMIN_WAIT_MS: every admin command may run twice. */
int jc__ctl_admin(const char *command, const struct jc_strv *args, int offline_ok,
		  struct jc_admin_reply *out)
{
	struct jc_admin_req req = {.command = (char *)command};
	char err[512] = "", why[400];
	uint64_t deadline = jc__now_ms() + ADMIN_WAIT_MS;
	if (args)
		req.args = *args;
	/* --socket PATH alone means that daemon: no directory to fall back on. */
	offline_ok &= !jc__ctl_socket || jc__ctl_cache_dir;
	for (;;) {
		jc_client *c = NULL;
		int rc = jc__ctl_open_client(0, &c);
		if (rc == JC_ECONNECT && offline_ok) {
			rc = run_offline(&req, out, why, sizeof(why));
			if (rc != JC_ELOCKED)
				return rc;
			snprintf(err, sizeof(err),
				 "a daemon holds the cache directory but its "
				 "socket does not answer: %s",
				 why);
		} else if (rc != 0) {
			snprintf(err, sizeof(err), "%s", jc_client_errmsg(NULL));
		} else {
			/* An admin command answers in seconds; a stopped daemon must not
			 * hang the caller (a purge of 1M entries stays well inside). */
			jc_client_set_timeout(c, ADMIN_TIMEOUT_MS);
			rc = jc__client_admin(c, &req, out);
			if (rc != 0)
				snprintf(err, sizeof(err), "%s", jc_client_errmsg(c));
			jc_client_close(c);
			if (rc == 0)
				return 0;
			jc__admin_reply_clear(out);
		}
		if ((rc != JC_ELOCKED && rc != JC_EIO && rc != JC_EBUSY) ||
		    jc__now_ms() >= deadline)
			return jc__ctl_die(1, "%s", err);
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
	}
}
