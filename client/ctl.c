/* SPDX-License-Identifier: MIT */
/*
 * jitcachectl: compile and link through jitcached, and the ops commands
 * (stats, purge, ls, show, verify, gc, ping, version, doctor). stats, ls,
 * show, purge, verify and gc also work on the cache directory directly
 * when no daemon runs (under the same lock a daemon takes).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>
#include <xxhash.h>

#include "client/client_internal.h"
#include "client/doctor.h"
#include "client/bundle.h"
#include "client/inspect.h"
#include "client/progress.h"
#include "common/includes.h"
#include "common/log.h"
#include "common/util.h"
#include "config.h"
#include "core/admin.h"
#include "core/evict.h"
#include "core/kept.h"

#define ADMIN_TIMEOUT_MS 120000

static const char *socket_path;
static const char *cache_dir;

/* Each subcommand's usage, for `help SUB`, `SUB --help` and errors. */
static const struct sub_help {
	const char *name, *text;
} subs[] = {
	{"compile", "compile FILE.cu --arch ARCH[,ARCH...] [--output cubin|ptx|ltoir|fatbin] [-o OUT]\n"
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
	{"link", "link --arch ARCH [--lto] [--output cubin|ptx] [-o OUT] [--link-option OPT]... INPUT...\n"
		 "  Links with nvJitLink in the order given; an INPUT's type comes from its extension\n"
		 "  (.ptx .ltoir .cubin .fatbin .o .a) or a TYPE:PATH prefix. -o as for compile\n"
		 "  (default a.cubin / a.ptx).\n"},
	{"stats", "stats [--json | --prometheus] [--zero] [--by-user]\n"
		  "  Counters and figures (offline from the cache directory when no daemon runs).\n"
		  "  Admins (root, the daemon's uid, --admin-group) see the daemon's; any other user\n"
		  "  of a shared daemon their own entries, bytes and hits. --by-user (admins): one\n"
		  "  line per uid and its user name: entries, bytes (a shared entry in full for\n"
		  "  each), hits.\n"
		  "  --zero (admins) resets the counters.\n"},
	{"purge", "purge --all | --negative | --older-than DUR | --unused-for DUR | --key KEY | --arch ARCH\n"
		  "      | --stale-versions | --to-size SIZE  [--dry-run]\n"
		  "  Removes entries (selections combine with AND). A user who is not an admin\n"
		  "  purges their own: an entry another user also uses stays for them.\n"},
	{"ls", "ls [--json]\n  Lists the entries (a user who is not an admin: their own, with their\n"
	       "  own hits and access times).\n"},
	{"show", "show KEY\n  One entry, with its compile log (a user's own only: another's key\n"
		 "  answers as one nobody has).\n"},
	{"verify", "verify\n  Checks every object's size and hash; quarantines bad ones.\n"},
	{"gc", "gc\n  Collects orphaned objects.\n"},
	{"ping", "ping\n  Asks the daemon whether it answers.\n"},
	{"version", "version [--json]\n  The daemon's and the toolchain's versions (--json: as one JSON object).\n"},
	{"doctor", "doctor\n  The run-time checklist: driver, devices, NVRTC, daemon, cache directory.\n"},
	{"inspect", "inspect FILE | --key KEY [--json]\n"
		    "  What a cubin, PTX, LTO-IR or fatbin holds: targets, PTX ISA, kernels with\n"
		    "  registers, shared memory, stack and launch bounds; --key: an entry's object.\n"},
	{"config", "config\n  The effective client configuration, and where each value comes from.\n"},
	{"stop", "stop\n  Stops the daemon cleanly, as SIGTERM does.\n"},
	{"warm", "warm [--top N] [--since DURATION] [--wait] [--status]\n"
		 "  Compiles the kept requests of entries made by another toolchain (NVRTC,\n"
		 "  nvJitLink, driver) again for the daemon's, most used first, in the background\n"
		 "  at idle priority (--rewarm-workers, --rewarm-budget); clients go first. --top:\n"
		 "  the N most valuable; --since: used within DURATION. --wait: until done, with\n"
		 "  progress. Lists the requests the new toolchain fails to compile (each kept as a\n"
		 "  negative entry with its log). --status: the last re-warm's figures. Admins.\n"},
	{"export", "export [--top N] [--uid U] [--secret-file FILE] -o FILE\n"
		   "  Writes the kept requests (the most valuable N) to a signed bundle (HMAC-SHA256\n"
		   "  with the secret: ~/.config/jitcache/bundle.key, made when missing). A user\n"
		   "  who is not an admin exports their own; --uid U (admins): U's.\n"},
	{"import", "import FILE [--wait] [--secret-file FILE]\n"
		   "  Checks the bundle's signature (refused when it does not match), then compiles\n"
		   "  its requests into this machine's cache (or takes them from the fleet tier),\n"
		   "  in the background; --wait: here, with progress, and a summary.\n"},
	{"help", "help [COMMAND]\n  This text, or COMMAND's.\n"},
};

static const struct sub_help *find_sub(const char *name)
{
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(subs[i].name, name) == 0)
			return &subs[i];
	return NULL;
}

static void usage(FILE *f)
{
	fputs("usage: jitcachectl [--socket PATH] [--cache-dir DIR] COMMAND [ARGS]\n"
	      "  --socket PATH    that daemon only (nothing answering: an error, or offline on\n"
	      "                   --cache-dir DIR when given too)\n"
	      "  --cache-dir DIR  the daemon serving DIR (found through DIR), else DIR offline\n"
	      "commands:\n", f);
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		const char *t = subs[i].text;
		fprintf(f, "  %.*s\n", (int)strcspn(t, "\n"), t);
	}
	fputs("`jitcachectl help COMMAND` or `jitcachectl COMMAND --help`: that command.\n", f);
}

/* COMMAND's usage to f. */
static void sub_usage(FILE *f, const char *name)
{
	const struct sub_help *h = find_sub(name);
	if (h)
		fprintf(f, "usage: jitcachectl [--socket PATH] [--cache-dir DIR] %s", h->text);
	else
		usage(f);
}

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The client library's messages (auto-start, the in-process fallback). */
static void log_to_stderr(void *ctx, int level, const char *message)
{
	(void)ctx;
	if (level <= JC_LOG_NOTICE)
		fprintf(stderr, "%s\n", message);
}

static int die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("jitcachectl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

/* The bytes of path, malloc'd; -1 with errno (EFBIG at JC_FRAME_MAX, the
 * most a request carries: /dev/zero is not read until memory runs out). */
static int read_file(const char *path, uint8_t **data, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 65536, n = 0;
	uint8_t *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		if (cap >= JC_FRAME_MAX) {
			free(buf);
			fclose(f);
			errno = EFBIG;
			return -1;
		}
		uint8_t *p = realloc(buf, cap * 2);
		if (!p) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = p;
		cap *= 2;
	}
	int err = ferror(f);
	fclose(f);
	if (!buf || err) {
		free(buf);
		return -1;
	}
	*data = buf;
	*size = n;
	return 0;
}

static int write_all(int fd, const void *data, size_t size)
{
	const char *p = data;
	while (size) {
		ssize_t n = write(fd, p, size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

/* The directory part of path ("." when none), into dir. */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	snprintf(dir, len, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
}

/*
 * A symbolic link (its lstat in st) that -o may follow: owned by this user
 * or root, in a directory nobody else may write (so nobody else could have
 * put it there, nor swap it). Else 0, with why it is not followed in why.
 */
static int link_trusted(const char *path, const struct stat *st, char *why, size_t len)
{
	char dir[4200];
	struct stat ds;
	dir_of(path, dir, sizeof(dir));
	if (st->st_uid != geteuid() && st->st_uid != 0)
		snprintf(why, len, "a symbolic link owned by uid %u (neither this user nor root)",
			 (unsigned)st->st_uid);
	else if (stat(dir, &ds) != 0 || (ds.st_mode & S_IWOTH))
		snprintf(why, len, "a symbolic link in %s, a directory anyone may write", dir);
	else
		return 1;
	return 0;
}

/* The bytes into a temporary file made with mkstemp beside path (O_EXCL,
 * an unpredictable name), renamed over path: a regular file, or a link not
 * to be followed, is replaced, never written through. The mode is that of
 * the regular file replaced (st, NULL: none) less its set-ID bits, else
 * 0666 & ~umask. -1 with errno. */
static int replace_output(const char *path, const struct stat *st, const void *data, size_t size)
{
	char tmp[4200];
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(tmp, sizeof(tmp), "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
		      : snprintf(tmp, sizeof(tmp), ".%s.XXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -1;
	mode_t mask = umask(0);
	umask(mask);
	int rc = write_all(fd, data, size);
	/* Not its set-ID bits: the new file is ours, and a set-user-ID file
	 * another user owned must not become one of ours (root's, say). */
	rc = rc ?: fchmod(fd, st ? st->st_mode & 01777 : 0666 & ~mask);
	int e = errno;
	if (close(fd) != 0 && rc == 0)
		e = errno, rc = -1;
	if (rc == 0 && rename(tmp, path) != 0)
		e = errno, rc = -1;
	if (rc != 0) {
		unlink(tmp);
		errno = e;
	}
	return rc;
}

/* The bytes written into the existing node at path (a device, a FIFO, a
 * regular file reached through links this user may follow, /proc's links to
 * open files), truncating a regular one; follow: path may be a link (one
 * of /proc's). -1 with errno. */
static int write_through(const char *path, int follow, const void *data, size_t size)
{
	struct stat st;
	int regular = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW) |
				(regular ? O_TRUNC : 0));
	if (fd < 0)
		return -1;
	int rc = write_all(fd, data, size);
	int e = errno;
	if (close(fd) != 0 && rc == 0)
		return -1;
	errno = e;
	return rc;
}

#define MAX_LINKS 40 /* as the kernel's path walk */

/*
 * Writes the artifact to path; 0, or -1 with the reason in why. "-" is
 * standard output. path is walked link by link: a symbolic link is followed
 * only when this user may trust it (link_trusted); the first one it may not
 * is replaced with a regular file (replace_output), or, where it cannot be
 * (another user's link in a sticky directory), nothing is written. A link
 * in /proc (/dev/stdout's /proc/self/fd/1) is opened as the kernel resolves
 * it. At the end of the walk: a node that is not a regular file (a device,
 * a FIFO) is written through, never replaced; a regular file named itself,
 * or no file, is replaced by replace_output (a regular file only when this
 * user may write it); a regular file reached through links is written
 * through.
 */
static int write_output(const char *path, const void *data, size_t size, char *why, size_t len)
{
	char cur[4200], next[4200], target[4096], dir[4200], untrusted[4300];
	struct stat st;
	struct statfs sf;
	int rc;
	if (strcmp(path, "-") == 0) {
		rc = write_all(STDOUT_FILENO, data, size) == 0 && fflush(stdout) == 0 ? 0 : -1;
		goto out;
	}
	snprintf(cur, sizeof(cur), "%s", path);
	for (int links = 0;; links++) {
		if (lstat(cur, &st) != 0) {
			rc = errno == ENOENT ? replace_output(cur, NULL, data, size) : -1;
			goto out;
		}
		if (!S_ISLNK(st.st_mode))
			break;
		if (!link_trusted(cur, &st, untrusted, sizeof(untrusted))) {
			if (replace_output(cur, NULL, data, size) == 0)
				return 0;
			snprintf(why, len, "not writing %s: %s is %s: not followed, and it cannot be "
				 "replaced: %s", path, cur, untrusted, strerror(errno));
			return -1;
		}
		dir_of(cur, dir, sizeof(dir));
		if (statfs(dir, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
			rc = write_through(cur, 1, data, size);
			goto out;
		}
		ssize_t n = readlink(cur, target, sizeof(target) - 1);
		if (n < 0 || links == MAX_LINKS) {
			if (n >= 0)
				errno = ELOOP;
			rc = -1;
			goto out;
		}
		target[n] = '\0';
		if ((target[0] == '/' ? snprintf(next, sizeof(next), "%s", target)
				      : snprintf(next, sizeof(next), "%s/%s", dir, target)) >= (int)sizeof(next)) {
			errno = ENAMETOOLONG;
			rc = -1;
			goto out;
		}
		memcpy(cur, next, sizeof(cur));
	}
	if (!S_ISREG(st.st_mode) || strcmp(cur, path) != 0)
		rc = write_through(cur, 0, data, size);
	else if (access(cur, W_OK) != 0)
		rc = -1; /* not ours to replace */
	else
		rc = replace_output(cur, &st, data, size);
out:
	if (rc != 0)
		snprintf(why, len, "cannot write %s: %s", cur, strerror(errno));
	return rc;
}

/* The options that say which daemon: --socket and --cache-dir, as jitcache.h
 * means them. compile: without either, every step (auto-start, in-process
 * fallback) as the environment says; with one, that daemon only, or an
 * error. Admin commands never auto-start nor compile. */
/* compile: 0 an admin command (a running daemon only), 1 a compile (a
 * daemon found or started, else in-process unless a daemon was named), 2 an
 * import (a daemon found or started, never in-process: nothing would be
 * cached). */
static int open_client(int compile, jc_client **c)
{
	jc_options *o = NULL;
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, socket_path);
	rc = rc ?: jc_options_set_cache_dir(o, cache_dir);
	if (rc == 0 && (compile != 1 || socket_path || cache_dir))
		rc = jc_options_set_fallback(o, JC_FALLBACK_ERROR);
	if (rc == 0 && !compile)
		rc = jc_options_set_autostart(o, 0);
	if (rc == 0 && compile)
		rc = jc_options_set_log(o, log_to_stderr, NULL);
	rc = rc ?: jc_client_open(o, c);
	jc_options_free(o);
	return rc;
}

static jc_client *connect_or_die(int *rc)
{
	jc_client *c = NULL;
	*rc = open_client(1, &c);
	if (*rc != 0)
		die(1, "%s", jc_client_errmsg(NULL));
	return c;
}

/* --- compile and link ---------------------------------------------------------- */

static void print_status(const jc_result *res)
{
	/* The status word first; this request's times; the entry's compile time
	 * (the original compile's, for any kind of hit) as compiled_ms. */
	const char *word = jc__cache_status_name((uint32_t)jc_result_cache_status(res));
	fprintf(stderr, "%s\tkey=%s\ttotal_ms=%.3f\tserver_ms=%.3f\tcompiled_ms=%.3f\n",
		word ? word : "?", jc_result_key(res), jc_result_time_ns(res, JC_TIME_TOTAL) / 1e6,
		jc_result_time_ns(res, JC_TIME_SERVER) / 1e6,
		jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6);
}

/* nvcc's default output name: the source's (or "a") stem in the working
 * directory, with the extension of what was made. */
static void default_output(char *buf, size_t len, const char *source, jc_output output)
{
	const char *base = source ? strrchr(source, '/') : NULL;
	base = base ? base + 1 : source ? source : "a";
	const char *dot = strrchr(base, '.');
	int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
	const char *ext = output == JC_PTX ? "ptx" : output == JC_LTOIR ? "ltoir"
			  : output == JC_FATBIN ? "fatbin" : "cubin";
	snprintf(buf, len, "%.*s.%s", stem, base, ext);
}

/* Common tail of compile and link: run, report, write OUT (NULL: the
 * default name from source, said on stderr). what: "compile" or "link". */
static int run_request(jc_request *req, const char *out_path, const char *source, const char *what)
{
	int rc;
	char dflt[4200];
	jc_client *c = connect_or_die(&rc);
	if (!c)
		return 1;
	jc_result *res = NULL;
	rc = jc_compile(c, req, &res);
	if (res)
		print_status(res);
	if (rc == JC_ECOMPILE) {
		jc__escape_fputs(jc_result_log(res), stderr);
		die(1, "%s failed", what);
	} else if (rc != 0) {
		die(1, "%s (%s)", jc_client_errmsg(c), jc_strerror(rc));
	} else {
		/* Warnings of a successful compile. */
		const char *log = jc_result_log(res);
		jc__escape_fputs(log, stderr);
		if (*log && log[strlen(log) - 1] != '\n')
			fputc('\n', stderr);
		const char *expr, *lowered;
		for (size_t i = 0; jc_result_lowered_at(res, i, &expr, &lowered) == 0; i++) {
			jc__escape_fputs(expr, stdout);
			putchar('\t');
			jc__escape_fputs(lowered, stdout);
			putchar('\n');
		}
		fflush(stdout);
		size_t size;
		const char *data = jc_result_data(res, &size);
		/* NVRTC's PTX ends with its NUL terminator: the file holds the text. */
		if (jc_result_output(res) == JC_PTX && size && data[size - 1] == '\0')
			size--;
		if (!out_path) {
			default_output(dflt, sizeof(dflt), source, jc_result_output(res));
			out_path = dflt;
		}
		char why[9000];
		if (write_output(out_path, data, size, why, sizeof(why)) != 0) {
			die(1, "%s", why);
			rc = JC_EIO;
		} else if (out_path == dflt) {
			fprintf(stderr, "jitcachectl: wrote %s (%zu bytes; -o PATH to choose, -o - for "
				"standard output)\n", out_path, size);
		}
	}
	jc_result_free(res);
	jc_client_close(c);
	return rc == 0 ? 0 : 1;
}

/* TYPE:PATH, or the type from PATH's extension; -1 when neither tells, -2
 * for an unknown TYPE (a prefix without '/' before a ':', unless ARG is an
 * existing file of that name). */
static int link_input_type(const char *arg, const char **path)
{
	static const struct {
		const char *ext;
		jc_link_input type;
	} exts[] = {{".ptx", JC_LINK_PTX}, {".ltoir", JC_LINK_LTOIR}, {".cubin", JC_LINK_CUBIN},
		    {".fatbin", JC_LINK_FATBIN}, {".o", JC_LINK_OBJECT}, {".a", JC_LINK_LIBRARY}};
	const char *colon = strchr(arg, ':');
	if (colon) {
		char type[16];
		snprintf(type, sizeof(type), "%.*s", (int)(colon - arg), arg);
		int t = jc__input_type_parse(type);
		if (t > 0) {
			*path = colon + 1;
			return t;
		}
		if (colon > arg && !memchr(arg, '/', (size_t)(colon - arg)) && access(arg, F_OK) != 0)
			return -2;
	}
	*path = arg;
	const char *dot = strrchr(arg, '.');
	for (size_t i = 0; dot && i < sizeof(exts) / sizeof(exts[0]); i++)
		if (strcmp(dot, exts[i].ext) == 0)
			return exts[i].type;
	return -1;
}

/* Adds the link input ARG (TYPE:PATH or PATH with a known extension); 0 or exit code 2. */
static int add_link_input(jc_request *req, const char *arg)
{
	const char *path;
	int type = link_input_type(arg, &path);
	uint8_t *data;
	size_t size;
	if (type == -2)
		return die(2, "unknown input type '%.*s' in %s: use ptx, ltoir, cubin, fatbin, object "
			   "or library", (int)(strchr(arg, ':') - arg), arg, arg);
	if (type < 0)
		return die(2, "cannot tell the type of %s: use TYPE:PATH (ptx, ltoir, cubin, fatbin, "
			   "object, library)", arg);
	if (read_file(path, &data, &size) != 0)
		return die(2, "cannot read %s: %s", path, strerror(errno));
	const char *base = strrchr(path, '/');
	int rc = jc_request_add_link_input(req, (jc_link_input)type, base ? base + 1 : path, data, size);
	free(data);
	return rc ? die(2, "cannot add link input %s: %s", arg, jc_strerror(rc)) : 0;
}

/*
 * The NVRTC options: first "-I<the source file's directory>", so that
 * `#include "local.h"` beside the source works as with nvcc (it enters the
 * key like any -I), then the options after "--" as given (the client
 * library resolves relative -I directories against our working directory).
 */
static int add_nvrtc_options(jc_request *req, const char *file, char **argv, int n)
{
	char opt[4200];
	const char *slash = strrchr(file, '/');
	if (slash)
		snprintf(opt, sizeof(opt), "-I%.*s", slash == file ? 1 : (int)(slash - file), file);
	else
		snprintf(opt, sizeof(opt), "-I.");
	int rc = jc_request_add_option(req, opt);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = jc_request_add_option(req, argv[i]);
	return rc ? die(2, "bad NVRTC option: %s", jc_strerror(rc)) : 0;
}

static int cmd_compile(int argc, char **argv)
{
	static const struct option opts[] = {
		{"arch", required_argument, NULL, 'a'}, {"output", required_argument, NULL, 'O'},
		{"header", required_argument, NULL, 'H'}, {"name-expr", required_argument, NULL, 'n'},
		{"app-abi", required_argument, NULL, 'A'}, {"link", required_argument, NULL, 'k'},
		{"link-option", required_argument, NULL, 'L'},
		/* Hidden, for tests and ops drills: see docs/contributing.md (JITCACHE_TEST_FAULTS). */
		{"test-fault", required_argument, NULL, 'F'}, {NULL, 0, NULL, 0},
	};
	static const char *const faults[] = {[JC_FAULT_CRASH] = "crash", [JC_FAULT_HANG] = "hang",
					     [JC_FAULT_ALLOC] = "alloc"};
	jc_request *req;
	const char *out_path = NULL, *arch = NULL;
	int c, rc = 1, output = 0;
	if (jc_request_new(&req) != 0)
		return die(1, "out of memory");
	/* Everything after "--" goes to NVRTC untouched. */
	int all = argc, nvrtc_first = argc;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nvrtc_first = i + 1;
			argc = i;
			break;
		}
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		int out;
		char *eq;
		uint8_t *data;
		size_t size;
		switch (c) {
		case 'a':
			arch = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'O':
			if ((out = jc__output_parse(optarg)) < 0) {
				die(2, "bad --output '%s': cubin, ptx, ltoir or fatbin", optarg);
				goto out;
			}
			output = out;
			break;
		case 'H':
			if (!(eq = strchr(optarg, '=')) || eq == optarg) {
				die(2, "bad --header '%s': NAME=PATH expected", optarg);
				goto out;
			}
			*eq = '\0';
			if (read_file(eq + 1, &data, &size) != 0) {
				die(2, "cannot read header %s: %s", eq + 1, strerror(errno));
				goto out;
			}
			rc = jc_request_add_header(req, optarg, data, size);
			free(data);
			if (rc != 0) {
				die(2, "bad header name '%s'", optarg);
				goto out;
			}
			rc = 1;
			break;
		case 'n':
			jc_request_add_name_expression(req, optarg);
			break;
		case 'A':
			jc_request_set_app_abi(req, optarg);
			break;
		case 'k':
			if ((rc = add_link_input(req, optarg)) != 0)
				goto out;
			rc = 1;
			break;
		case 'L':
			jc_request_add_link_option(req, optarg);
			break;
		case 'F':
			out = JC_FAULT_CRASH;
			while (out <= JC_FAULT_ALLOC && strcmp(optarg, faults[out]) != 0)
				out++;
			if (jc__request_set_test_fault(req, (uint32_t)out) != 0) {
				rc = die(2, "bad --test-fault '%s': crash, hang or alloc", optarg);
				goto out;
			}
			break;
		default:
			sub_usage(stderr, "compile");
			rc = 2;
			goto out;
		}
	}
	if (optind != argc - 1 || !arch) {
		die(2, "compile needs one FILE.cu and --arch ARCH (NVRTC options go after --)");
		rc = 2;
		goto out;
	}
	const char *file = argv[optind++];
	uint8_t *src;
	size_t size;
	if (read_file(file, &src, &size) != 0) {
		die(2, "cannot read %s: %s", file, strerror(errno));
		rc = 2;
		goto out;
	}
	const char *base = strrchr(file, '/');
	jc_request_set_source(req, base ? base + 1 : file, src, size);
	free(src);
	/* A target list makes a fatbin (jc_request_set_arch). */
	if (strchr(arch, ',') && output && output != JC_FATBIN) {
		rc = die(2, "--arch %s is a target list, which makes a fatbin: --output %s does not "
			 "go with it", arch, jc__output_name((uint32_t)output));
		goto out;
	}
	jc_request_set_arch(req, arch);
	if (output)
		jc_request_set_output(req, (jc_output)output);
	if ((rc = add_nvrtc_options(req, file, argv + nvrtc_first, all - nvrtc_first)) == 0)
		rc = run_request(req, out_path, file, "compile");
out:
	jc_request_free(req);
	return rc;
}

static int cmd_link(int argc, char **argv)
{
	static const struct option opts[] = {
		{"arch", required_argument, NULL, 'a'}, {"output", required_argument, NULL, 'O'},
		{"lto", no_argument, NULL, 'l'}, {"link-option", required_argument, NULL, 'L'},
		{NULL, 0, NULL, 0},
	};
	jc_request *req;
	const char *out_path = NULL, *arch = NULL;
	int c, rc = 2;
	if (jc_request_new(&req) != 0)
		return die(1, "out of memory");
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		int out;
		switch (c) {
		case 'a':
			arch = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'O':
			if ((out = jc__output_parse(optarg)) != JC_PTX && out != JC_CUBIN) {
				die(2, "bad --output '%s': cubin or ptx", optarg);
				goto out;
			}
			jc_request_set_output(req, (jc_output)out);
			break;
		case 'l':
			jc_request_add_link_option(req, "-lto");
			break;
		case 'L':
			jc_request_add_link_option(req, optarg);
			break;
		default:
			sub_usage(stderr, "link");
			goto out;
		}
	}
	if (!arch || optind >= argc) {
		die(2, "link needs --arch ARCH and at least one INPUT");
		goto out;
	}
	jc_request_set_arch(req, arch);
	for (; optind < argc; optind++)
		if (add_link_input(req, argv[optind]) != 0)
			goto out;
	rc = run_request(req, out_path, NULL, "link");
out:
	jc_request_free(req);
	return rc;
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
	if (cache_dir)
		snprintf(dir, sizeof(dir), "%s", cache_dir);
	else if (jc__default_cache_dir(dir, sizeof(dir)) != 0)
		return die(1, "no cache directory: use --cache-dir or set JITCACHE_DIR");
	struct stat st;
	if (stat(dir, &st) != 0)
		return die(1, "no daemon answers and there is no cache at %s", dir);
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
		die(1, "%s", err);
	}
	jc__cachedir_close(cd);
	return rc ? 1 : 0;
}

/* How long a daemon that is starting (it holds DIR/lock before it listens)
 * or stopping (it drops connections, then the lock) is waited for; the
 * daemon waits as long for the lock at start. */
#define ADMIN_WAIT_MS 2000

/* Sends an admin command, falling back to the directory when allowed. An
 * answer lost to a daemon going away, or a lock held by a daemon that does
 * not answer yet, is retried (through the daemon or offline, whichever
 * works first) until ADMIN_WAIT_MS: every admin command may run twice. */
static int admin(const char *command, const struct jc_strv *args, int offline_ok,
		 struct jc_admin_reply *out)
{
	struct jc_admin_req req = {.command = (char *)command};
	char err[512] = "", why[400];
	uint64_t deadline = jc__now_ms() + ADMIN_WAIT_MS;
	if (args)
		req.args = *args;
	/* --socket PATH alone means that daemon: no directory to fall back on. */
	offline_ok &= !socket_path || cache_dir;
	for (;;) {
		jc_client *c = NULL;
		int rc = open_client(0, &c);
		if (rc == JC_ECONNECT && offline_ok) {
			rc = run_offline(&req, out, why, sizeof(why));
			if (rc != JC_ELOCKED)
				return rc;
			snprintf(err, sizeof(err), "a daemon holds the cache directory but its "
				 "socket does not answer: %s", why);
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
		if ((rc != JC_ELOCKED && rc != JC_EIO) || jc__now_ms() >= deadline)
			return die(1, "%s", err);
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
	}
}

static void json_record(FILE *f, const struct jc_record *r)
{
	fputc('{', f);
	for (size_t i = 0; i < r->n; i++) {
		if (i)
			fputs(", ", f);
		jc__json_str(f, r->kv[i].name);
		fputs(": ", f);
		if (r->kv[i].is_unsigned)
			fprintf(f, "%" PRIu64, r->kv[i].u);
		else if (r->kv[i].is_int)
			fprintf(f, "%" PRId64, r->kv[i].i);
		else
			jc__json_str(f, r->kv[i].s);
	}
	fputc('}', f);
}

static int64_t geti(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return kv && kv->is_int ? kv->i : 0;
}

/* A counter or size (sent unsigned; an older daemon sends it signed). */
static uint64_t getu(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return !kv || !kv->is_int ? 0 : kv->is_unsigned ? kv->u : (uint64_t)kv->i;
}

static const char *gets_(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return kv && !kv->is_int ? kv->s : "";
}

/* A "users" field (uids, comma-separated) as names: "alice, bob, (1234)"
 * (a uid without a name in parentheses), then a newline. */
static void print_users(const char *uids)
{
	const char *p = uids;
	while (*p) {
		char *end;
		unsigned long uid = strtoul(p, &end, 10);
		if (end == p)
			break;
		struct passwd *pw = getpwuid((uid_t)uid);
		printf("%s", p == uids ? "" : ", ");
		if (pw)
			jc__escape_fputs(pw->pw_name, stdout);
		else
			printf("(%lu)", uid);
		p = *end == ',' ? end + 1 : end;
	}
	putchar('\n');
}

/* Local time of a unix time, "YYYY-MM-DD HH:MM:SS" (static buffer). */
static const char *when(int64_t unix_s)
{
	static char buf[32];
	time_t t = (time_t)unix_s;
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, sizeof(buf), "%" PRId64, unix_s);
	return buf;
}

static void human_bytes(char *buf, size_t len, double b)
{
	const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (b >= 1024 && u < 4)
		b /= 1024, u++;
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

static double pct(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

/* The remote tier's lines of `stats` (none when it is off or offline). */
static void print_remote(const struct jc_record *r)
{
	const char *state = gets_(r, "remote_state");
	if (!*state || strcmp(state, "off") == 0)
		return;
	char in[32], out[32];
	human_bytes(in, sizeof(in), (double)getu(r, "remote_bytes_in"));
	human_bytes(out, sizeof(out), (double)getu(r, "remote_bytes_out"));
	printf("Remote tier:              %s, %s%s%s\n", gets_(r, "remote_url"), state,
	       geti(r, "remote_read_only") ? ", read-only" : "",
	       geti(r, "remote_unsigned") ? ", UNSIGNED values (--remote-unsigned)" : ", signed values");
	printf("  Hits:                   %10" PRIu64 "\n", getu(r, "remote_hits"));
	printf("  Misses:                 %10" PRIu64 "\n", getu(r, "remote_misses"));
	printf("  Publishes:              %10" PRIu64 "\n", getu(r, "remote_publishes"));
	printf("  Rejected values:        %10" PRIu64 "\n", getu(r, "remote_rejected"));
	printf("  Errors:                 %10" PRIu64 "%s%s\n", getu(r, "remote_errors"),
	       *gets_(r, "remote_last_error") ? "  last: " : "", gets_(r, "remote_last_error"));
	printf("  Bytes in / out:         %s / %s\n", in, out);
	if (geti(r, "remote_latency_samples") > 0)
		printf("  Hit latency:            p50 %" PRId64 " us, p99 %" PRId64 " us (fetch + verify)\n",
		       geti(r, "remote_p50_us"), geti(r, "remote_p99_us"));
}

/* stats as a uid other than the admins' sees it: its own entries. */
static void print_stats_own(const struct jc_record *r)
{
	char used[32], share[32];
	uint64_t max = getu(r, "user_max_size");
	human_bytes(used, sizeof(used), (double)getu(r, "stored_bytes"));
	human_bytes(share, sizeof(share), (double)max);
	printf("Entries of %-15s %10" PRIu64 "\n", gets_(r, "scope"), getu(r, "entries"));
	printf("  Negative entries:       %10" PRIu64 "\n", getu(r, "negative_entries"));
	printf("  Hits on them:           %10" PRIu64 "\n", getu(r, "hits"));
	printf("  Bytes:                  %s%s%s%s\n", used, max ? " of a share of " : "",
	       max ? share : "", max ? " (--user-max-size)" : "");
	printf("Daemon:                   pid %" PRId64 "; counters over all users are for its "
	       "admins\n", geti(r, "daemon_pid"));
	printf("Versions:                 jitcache %s, NVRTC %s, nvJitLink %s, driver %s\n",
	       gets_(r, "version"), gets_(r, "nvrtc_version"), gets_(r, "nvjitlink_version"),
	       gets_(r, "driver_version"));
}

/* stats --by-user: one line per uid, with its user name where the user
 * database has one ("-" otherwise). */
static void print_by_user(const struct jc_admin_reply *reply)
{
	printf("%10s  %-16s  %10s  %10s  %14s  %14s  %10s  %s\n", "UID", "USER", "ENTRIES",
	       "NEGATIVE", "BYTES", "STORED", "HITS", "OVER SHARE");
	for (size_t i = 0; i < reply->n_rec; i++) {
		const struct jc_record *r = &reply->rec[i];
		struct passwd *pw = getpwuid((uid_t)getu(r, "uid"));
		printf("%10" PRIu64 "  ", getu(r, "uid"));
		if (pw)
			jc__escape_fputs(pw->pw_name, stdout);
		printf("%*s  %10" PRIu64 "  %10" PRIu64 "  %14" PRIu64 "  %14" PRIu64 "  %10" PRIu64
		       "  %s\n", pw ? 16 - (int)strlen(pw->pw_name) : 16, pw ? "" : "-",
		       getu(r, "entries"), getu(r, "negative_entries"), getu(r, "bytes"),
		       getu(r, "stored_bytes"), getu(r, "hits"), geti(r, "over_share") ? "yes" : "no");
	}
}

/* A table in the manner of `ccache -s`: requests by outcome, compiles,
 * problems, the store against its budget, versions. */
static void print_stats_human(const struct jc_record *r)
{
	uint64_t hits = getu(r, "hits"), misses = getu(r, "misses");
	uint64_t neg = getu(r, "negative_hits"), joins = getu(r, "single_flight_joins");
	uint64_t compiles = getu(r, "compiles"), total = hits + misses + neg + joins;
	int64_t up = geti(r, "uptime_s");
	char used[32], budget[32], low[32], artifacts[32];
	uint64_t stored = getu(r, "stored_bytes") + getu(r, "overhead_bytes");
	human_bytes(used, sizeof(used), (double)stored);
	human_bytes(artifacts, sizeof(artifacts), (double)getu(r, "bytes"));
	human_bytes(budget, sizeof(budget), (double)getu(r, "max_size"));
	human_bytes(low, sizeof(low), (double)getu(r, "evict_low_water"));
	printf("Cache directory:          %s\n", gets_(r, "cache_dir"));
	if (up >= 0)
		printf("Daemon:                   pid %" PRId64 ", up %" PRId64 "d %02" PRId64 "h %02" PRId64
		       "m %02" PRId64 "s\n",
		       geti(r, "daemon_pid"), up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
	else
		printf("Daemon:                   none running (figures read from the cache directory)\n");
	printf("Requests:                 %10" PRIu64 "\n", total);
	printf("  Hits:                   %10" PRIu64 "  %6.2f %%\n", hits, pct((double)hits, (double)total));
	printf("  Negative hits:          %10" PRIu64 "  %6.2f %%\n", neg, pct((double)neg, (double)total));
	printf("  Misses:                 %10" PRIu64 "  %6.2f %%\n", misses, pct((double)misses, (double)total));
	printf("  Single-flight joins:    %10" PRIu64 "  %6.2f %%\n", joins, pct((double)joins, (double)total));
	printf("Hit ratio:                %17.2f %%\n", pct((double)(hits + neg), (double)total));
	/* The histogram is the daemon's own, since its start or stats --zero:
	 * it may count fewer hits than the persistent counter above. */
	int64_t since = geti(r, "hit_latency_since");
	if (up < 0)
		printf("Hit latency (daemon):     - (no daemon running)\n");
	else if (getu(r, "hit_latency_samples") > 0)
		printf("Hit latency (daemon):     p50 %" PRId64 " us, p99 %" PRId64 " us (%" PRIu64
		       " hits since %s)\n", geti(r, "hit_p50_us"), geti(r, "hit_p99_us"),
		       getu(r, "hit_latency_samples"), when(since));
	else
		printf("Hit latency (daemon):     no hits since %s\n", when(since));
	printf("Compiles:                 %10" PRIu64 "\n", compiles);
	printf("  Failures:               %10" PRIu64 "\n", getu(r, "compile_failures"));
	printf("  Timeouts:               %10" PRIu64 "\n", getu(r, "compile_timeouts"));
	printf("  Mean compile time:      %13.1f ms\n",
	       compiles ? (double)getu(r, "compile_ns") / 1e6 / (double)compiles : 0.0);
	printf("Worker crashes:           %10" PRIu64 "\n", getu(r, "worker_crashes"));
	printf("Corrupt objects:          %10" PRIu64 "\n", getu(r, "corrupt_objects"));
	printf("Load failures reported:   %10" PRIu64 "\n", getu(r, "load_failures"));
	printf("Bad requests:             %10" PRIu64 "\n", getu(r, "bad_requests"));
	printf("Entries:                  %10" PRIu64 "  (+ %" PRIu64 " negative)\n", getu(r, "entries"),
	       getu(r, "negative_entries"));
	printf("Size:                     %s of %s (%.1f %%): artifacts %s, logs, rows, index, reserve\n",
	       used, budget, pct((double)stored, (double)getu(r, "max_size")), artifacts);
	if (geti(r, "disk_full"))
		printf("Disk full:                %" PRId64 " KiB free; hits served, nothing stored\n",
		       geti(r, "disk_free_bytes") >> 10);
	printf("  Eviction:               above %s, down to %s, least recently used first\n", budget, low);
	if (getu(r, "user_max_size")) {
		human_bytes(budget, sizeof(budget), (double)getu(r, "user_max_size"));
		printf("  Share of each uid:      %s (--user-max-size)\n", budget);
	}
	printf("Evictions:                %10" PRIu64 "\n", getu(r, "evictions"));
	printf("  From uids over share:   %10" PRIu64 "\n", getu(r, "user_evictions"));
	print_remote(r);
	printf("Versions:                 jitcache %s, NVRTC %s, nvJitLink %s, driver %s\n",
	       gets_(r, "version"), gets_(r, "nvrtc_version"), gets_(r, "nvjitlink_version"),
	       gets_(r, "driver_version"));
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void prom_label(const char *name, const char *v, int last)
{
	printf("%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", stdout);
		else
			putchar(*v);
	}
	fputs(last ? "\"" : "\",", stdout);
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A summary of a latency the daemon keeps (p50, p99 in us, count, sum in ns
 * by their stats names): NaN quantiles while it has no sample. */
static void prom_summary(const struct jc_record *r, const char *name, const char *help,
			 const char *p50, const char *p99, const char *count, const char *sum)
{
	uint64_t n = getu(r, count);
	prom_family(name, "summary", help);
	if (n > 0)
		printf("%s{quantile=\"0.5\"} %.9g\n%s{quantile=\"0.99\"} %.9g\n", name,
		       (double)geti(r, p50) / 1e6, name, (double)geti(r, p99) / 1e6);
	else
		printf("%s{quantile=\"0.5\"} NaN\n%s{quantile=\"0.99\"} NaN\n", name, name);
	printf("%s_sum %.9g\n%s_count %" PRIu64 "\n", name, (double)getu(r, sum) / 1e9, name, n);
}

/*
 * The text exposition format (version 0.0.4) for node-exporter's textfile
 * collector: counters as jitcache_<name>_total (nanosecond counters in
 * seconds, as *_seconds_total), gauges, the server-side hit latency as a
 * summary, and the versions as labels of jitcache_build_info.
 */
static void print_prometheus(const struct jc_record *r)
{
	int up = geti(r, "uptime_s") >= 0;
	prom_family("jitcache_up", "gauge", "1 when a daemon answered, 0 when read from the cache directory");
	printf("jitcache_up %d\n", up);
	for (int i = 0; i < JC_CTR__COUNT; i++) {
		const char *n = jc__counter_names[i];
		char name[128];
		size_t len = strlen(n);
		if (!jc__record_get(r, n))
			continue; /* not this caller's (a non-admin: its own figures only) */
		if (len > 3 && strcmp(n + len - 3, "_ns") == 0) {
			snprintf(name, sizeof(name), "jitcache_%.*s_seconds_total", (int)(len - 3), n);
			prom_family(name, "counter", jc__counter_help[i]);
			printf("%s %.9g\n", name, (double)getu(r, n) / 1e9);
		} else {
			snprintf(name, sizeof(name), "jitcache_%s_total", n);
			prom_family(name, "counter", jc__counter_help[i]);
			printf("%s %" PRIu64 "\n", name, getu(r, n));
		}
	}
	static const char *const gauges[][3] = {
		{"jitcache_entries", "entries", "cached artifacts"},
		{"jitcache_negative_entries", "negative_entries", "cached compile failures"},
		{"jitcache_bytes", "bytes", "bytes of cached artifacts"},
		{"jitcache_stored_bytes", "stored_bytes", "bytes the entries store: objects, logs, rows"},
		{"jitcache_overhead_bytes", "overhead_bytes", "bytes the cache directory holds besides"},
		{"jitcache_disk_full", "disk_full", "1 while the disk is full: nothing is stored"},
		{"jitcache_max_size_bytes", "max_size", "byte budget (--max-size)"},
		{"jitcache_evict_low_water_bytes", "evict_low_water", "eviction stops at these bytes"},
	};
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
		prom_family(gauges[i][0], "gauge", gauges[i][2]);
		printf("%s %" PRIu64 "\n", gauges[i][0], getu(r, gauges[i][1]));
	}
	if (up) {
		prom_family("jitcache_uptime_seconds", "gauge", "seconds since the daemon started");
		printf("jitcache_uptime_seconds %" PRId64 "\n", geti(r, "uptime_s"));
		prom_summary(r, "jitcache_hit_duration_seconds",
			     "server-side time of cache hits since the start or stats --zero", "hit_p50_us",
			     "hit_p99_us", "hit_latency_samples", "hit_latency_sum_ns");
	}
	const char *state = gets_(r, "remote_state");
	if (up && *state && strcmp(state, "off") != 0) {
		static const char *const states[] = {"up", "degraded", "down"};
		prom_family("jitcache_remote_state", "gauge",
			    "1 for the remote tier's state now (up, degraded: recent failures, down: skipped)");
		for (size_t i = 0; i < 3; i++)
			printf("jitcache_remote_state{state=\"%s\"} %d\n", states[i],
			       strcmp(state, states[i]) == 0);
		prom_summary(r, "jitcache_remote_hit_duration_seconds",
			     "remote hits: fetch and verification, since the start or stats --zero",
			     "remote_p50_us", "remote_p99_us", "remote_latency_samples", "remote_latency_sum_ns");
	}
	prom_family("jitcache_build_info", "gauge", "versions of jitcache and of the CUDA toolchain it uses");
	fputs("jitcache_build_info{", stdout);
	prom_label("version", gets_(r, "version"), 0);
	prom_label("nvrtc", gets_(r, "nvrtc_version"), 0);
	prom_label("nvjitlink", gets_(r, "nvjitlink_version"), 0);
	prom_label("driver", gets_(r, "driver_version"), 1);
	fputs("} 1\n", stdout);
}

/* Parses the options of an admin command (its arguments in the command
 * table, admin.h) into "name[=value]" arguments. */
static int cmd_admin(const char *command, int argc, char **argv)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(command);
	if (!cmd)
		return die(2, "%s is not an admin command", command);
	struct option opts[32] = {{"json", no_argument, NULL, 0}};
	const struct jc_admin_arg *specs[32] = {NULL};
	const struct jc_admin_arg *positional = NULL;
	size_t n_opts = 1;
	for (const struct jc_admin_arg *a = cmd->args; a && a->name && n_opts < 31; a++) {
		if (!a->option) {
			positional = a;
			continue;
		}
		specs[n_opts] = a;
		opts[n_opts++] = (struct option){a->option, a->kind == JC_ARG_FLAG ? no_argument
										   : required_argument, NULL, 0};
	}
	struct jc_strv args = {0};
	int json = 0, prom = 0, zero = 0, c, idx, rc = 2;
	char buf[128];
	int64_t secs;
	uint64_t size;
	unsigned flags = cmd->flags;
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		const struct jc_admin_arg *a = c == 0 ? specs[idx] : NULL;
		if (c != 0) {
			sub_usage(stderr, command);
			goto out;
		}
		if (!a) {
			json = 1;
			continue;
		}
		flags |= a->flags;
		if (a->flags & JC_ADMIN_LOCAL) { /* how to print: stats --prometheus */
			prom = 1;
			continue;
		}
		zero |= strcmp(a->name, "zero") == 0;
		switch (a->kind) {
		case JC_ARG_FLAG:
			snprintf(buf, sizeof(buf), "%s", a->name);
			break;
		case JC_ARG_SECONDS:
			if (jc__parse_duration(optarg, &secs) != 0) {
				die(2, "bad duration '%s' (e.g. 90s, 15m, 2h, 7d)", optarg);
				goto out;
			}
			snprintf(buf, sizeof(buf), "%s=%" PRId64, a->name, secs);
			break;
		case JC_ARG_BYTES:
			if (jc__parse_size(optarg, &size) != 0) {
				die(2, "bad size '%s' (e.g. 500M, 2G)", optarg);
				goto out;
			}
			snprintf(buf, sizeof(buf), "%s=%" PRIu64, a->name, size);
			break;
		default:
			snprintf(buf, sizeof(buf), "%s=%s", a->name, optarg);
		}
		jc__strv_push(&args, buf);
	}
	if (json && prom) {
		die(2, "stats: choose one of --json and --prometheus");
		goto out;
	}
	if (positional) {
		if (optind >= argc) {
			die(2, "%s needs a KEY", command);
			goto out;
		}
		snprintf(buf, sizeof(buf), "%s=%s", positional->name, argv[optind++]);
		jc__strv_push(&args, buf);
	}
	if (optind < argc) {
		die(2, "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	struct jc_admin_reply reply = {0};
	rc = admin(command, &args, (flags & JC_ADMIN_OFFLINE) != 0, &reply);
	if (rc == 0 && reply.status != 0 && reply.status != JC_ECORRUPT) {
		rc = die(1, "%s: %s", command, reply.message ? reply.message : jc_strerror(reply.status));
	} else if (rc == 0) {
		if (json && (flags & JC_ADMIN_LISTS)) {
			fputc('[', stdout);
			for (size_t i = 0; i < reply.n_rec; i++) {
				fputs(i ? ",\n " : "", stdout);
				json_record(stdout, &reply.rec[i]);
			}
			fputs("]\n", stdout);
		} else if (json || strcmp(command, "ping") == 0) {
			for (size_t i = 0; i < reply.n_rec; i++) {
				json_record(stdout, &reply.rec[i]);
				fputc('\n', stdout);
			}
		} else if (strcmp(command, "version") == 0 && reply.n_rec) {
			/* one "name  value" line per field; --json: the record as it is */
			const struct jc_record *r = &reply.rec[0];
			for (size_t k = 0; k < r->n; k++) {
				printf("%-19s ", r->kv[k].name);
				if (r->kv[k].is_int)
					printf("%" PRId64 "\n", r->kv[k].i);
				else {
					jc__escape_fputs(r->kv[k].s, stdout);
					putchar('\n');
				}
			}
		} else if (strcmp(command, "stats") == 0 && (flags & JC_ADMIN_LISTS)) {
			print_by_user(&reply);
		} else if (strcmp(command, "stats") == 0 && zero) {
			printf("counters reset (the figures before the reset follow)\n");
			print_stats_human(&reply.rec[0]);
		} else if (strcmp(command, "stats") == 0 && reply.n_rec) {
			if (prom)
				print_prometheus(&reply.rec[0]);
			else if (strcmp(gets_(&reply.rec[0], "scope"), "all") != 0 &&
				 *gets_(&reply.rec[0], "scope"))
				print_stats_own(&reply.rec[0]);
			else
				print_stats_human(&reply.rec[0]);
		} else if (strcmp(command, "purge") == 0) {
			for (size_t i = 0; i < reply.n_rec; i++)
				printf("%s  %-6s  %10" PRId64 "\n", gets_(&reply.rec[i], "key"),
				       gets_(&reply.rec[i], "status"), geti(&reply.rec[i], "size"));
		} else if (strcmp(command, "ls") == 0) {
			printf("%-32s  %-8s  %-10s  %10s  %6s  %-19s  %s\n", "KEY", "KIND", "ARCH", "SIZE", "HITS",
			       "LAST ACCESS", "SOURCE");
			for (size_t i = 0; i < reply.n_rec; i++) {
				const struct jc_record *r = &reply.rec[i];
				printf("%-32s  %-8s  %-10s  %10" PRId64 "  %6" PRId64 "  %-19s  ", gets_(r, "key"),
				       gets_(r, "kind"), gets_(r, "arch"), geti(r, "size"), geti(r, "hits"),
				       when(geti(r, "last_access")));
				/* Names and logs are other clients' words: never an escape
				 * sequence on this terminal. */
				jc__escape_fputs(gets_(r, "source_name"), stdout);
				putchar('\n');
			}
		} else {
			for (size_t i = 0; i < reply.n_rec; i++) {
				const struct jc_record *r = &reply.rec[i];
				for (size_t k = 0; k < r->n; k++) {
					const struct jc_kv *kv = &r->kv[k];
					if (strcmp(kv->name, "log") == 0)
						continue;
					if (!kv->is_int && strcmp(kv->name, "users") == 0) {
						printf("%-12s ", kv->name);
						print_users(kv->s);
					} else if (!kv->is_int) {
						printf("%-12s ", kv->name);
						jc__escape_fputs(kv->s, stdout);
						putchar('\n');
					}
					else if (kv->i > 0 && (strcmp(kv->name, "created") == 0 ||
							       strcmp(kv->name, "last_access") == 0 ||
							       strcmp(kv->name, "expires") == 0))
						printf("%-12s %s (%" PRId64 ")\n", kv->name, when(kv->i), kv->i);
					else
						printf("%-12s %" PRId64 "\n", kv->name, kv->i);
				}
				const char *log = gets_(r, "log");
				if (*log) {
					fputs("log:\n", stdout);
					jc__escape_fputs(log, stdout);
					if (log[strlen(log) - 1] != '\n')
						putchar('\n');
				}
			}
		}
		if (reply.message && !json)
			fprintf(stderr, "%s\n", reply.message);
		if (reply.status == JC_ECORRUPT)
			rc = 1;
	}
	jc__admin_reply_clear(&reply);
out:
	for (size_t i = 0; i < args.n; i++)
		free(args.v[i]);
	free(args.v);
	return rc;
}

/* --- re-warm, export, import (daemon/rewarm.c, core/kept.h, bundle.h) ------ */

/* The requests a warm reply lists as failed (records after the first). */
static void print_failures(const struct jc_admin_reply *reply, const char *what)
{
	if (reply->n_rec > 1)
		printf("%zu requests failed to %s with this toolchain (kept as negative entries "
		       "with their logs; `jitcachectl show KEY`):\n", reply->n_rec - 1, what);
	for (size_t i = 1; i < reply->n_rec; i++) {
		const struct jc_record *r = &reply->rec[i];
		printf("  %s  ", gets_(r, "key"));
		jc__escape_fputs(gets_(r, "source_name"), stdout);
		fputs(": ", stdout);
		jc__escape_fputs(gets_(r, "message"), stdout);
		putchar('\n');
		const char *log = gets_(r, "log");
		if (*log) {
			jc__escape_fputs(log, stdout);
			if (log[strlen(log) - 1] != '\n')
				putchar('\n');
		}
	}
}

static int cmd_warm(int argc, char **argv)
{
	static const struct option opts[] = {
		{"top", required_argument, NULL, 't'}, {"since", required_argument, NULL, 's'},
		{"wait", no_argument, NULL, 'w'}, {"status", no_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	struct jc_strv args = {0};
	char buf[64];
	int64_t secs;
	int c, wait = 0, rc;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 't') {
			snprintf(buf, sizeof(buf), "top=%s", optarg);
		} else if (c == 's') {
			if (jc__parse_duration(optarg, &secs) != 0) {
				jc__strv_clear(&args);
				return die(2, "bad duration '%s' (e.g. 90s, 15m, 2h, 7d)", optarg);
			}
			snprintf(buf, sizeof(buf), "since=%" PRId64, secs);
		} else if (c == 'S') {
			snprintf(buf, sizeof(buf), "status");
		} else if (c == 'w') {
			wait = 1;
			continue;
		} else {
			jc__strv_clear(&args);
			sub_usage(stderr, "warm");
			return 2;
		}
		jc__strv_push(&args, buf);
	}
	if (optind < argc) {
		jc__strv_clear(&args);
		return die(2, "unexpected argument '%s'", argv[optind]);
	}
	struct jc_admin_reply reply = {0};
	rc = admin("warm", &args, 0, &reply);
	jc__strv_clear(&args);
	if (rc == 0 && reply.status != 0)
		rc = die(1, "warm: %s", reply.message ? reply.message : jc_strerror(reply.status));
	if (rc != 0 || !reply.n_rec) {
		jc__admin_reply_clear(&reply);
		return rc ? rc : die(1, "warm: empty answer");
	}
	const struct jc_record *r = &reply.rec[0];
	if (!geti(r, "keep_requests") && !getu(r, "total"))
		printf("requests are not kept (jitcached --keep-requests no): nothing to re-warm\n");
	else if (!getu(r, "total") && strcmp(gets_(r, "state"), "running") != 0)
		printf("nothing to re-warm: no kept request of an entry made by another toolchain\n");
	else
		printf("re-warm %s: %" PRIu64 " requests for %s\n", gets_(r, "state"),
		       getu(r, "total"), gets_(r, "identity"));
	struct jc_progress p;
	jc__progress_init(&p, stdout, "warm");
	while (wait && rc == 0 && strcmp(gets_(&reply.rec[0], "state"), "running") == 0) {
		r = &reply.rec[0];
		jc__progress_show(&p, getu(r, "done"), getu(r, "failed"), getu(r, "total"), 0);
		nanosleep(&(struct timespec){.tv_nsec = 200 * 1000000}, NULL);
		struct jc_strv st = {0};
		jc__strv_push(&st, "status");
		jc__admin_reply_clear(&reply);
		rc = admin("warm", &st, 0, &reply);
		jc__strv_clear(&st);
		if (rc == 0 && (reply.status != 0 || !reply.n_rec))
			rc = die(1, "warm: %s", reply.message ? reply.message : "empty answer");
	}
	if (rc == 0 && getu(&reply.rec[0], "total")) {
		r = &reply.rec[0];
		if (wait)
			jc__progress_show(&p, getu(r, "done"), getu(r, "failed"), getu(r, "total"), 1);
		if (strcmp(gets_(r, "state"), "running") != 0)
			printf("%" PRIu64 " done, %" PRIu64 " failed, %" PRIu64 " dropped (budget), "
			       "%.1f CPU s in %.1f s\n", getu(r, "done"), getu(r, "failed"),
			       getu(r, "dropped"), (double)getu(r, "cpu_ms") / 1e3,
			       (double)getu(r, "elapsed_ms") / 1e3);
		print_failures(&reply, "compile");
	}
	jc__admin_reply_clear(&reply);
	return rc;
}

static int unhex(const char *s, struct jc_blob *out)
{
	size_t n = strlen(s);
	if (n % 2)
		return JC_EINVAL;
	out->size = n / 2;
	out->data = malloc(out->size ? out->size : 1);
	if (!out->data)
		return JC_ENOMEM;
	for (size_t i = 0; i < out->size; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(out->data);
			out->data = NULL;
			return JC_EINVAL;
		}
		out->data[i] = (uint8_t)v;
	}
	return 0;
}

static int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{"top", required_argument, NULL, 't'}, {"uid", required_argument, NULL, 'u'},
		{"secret-file", required_argument, NULL, 'k'}, {NULL, 0, NULL, 0},
	};
	struct jc_strv args = {0};
	const char *out = NULL, *secret = NULL;
	char buf[64], err[512];
	int c, rc;
	optind = 0;
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (c == 't' || c == 'u') {
			snprintf(buf, sizeof(buf), "%s=%s", c == 't' ? "top" : "uid", optarg);
			jc__strv_push(&args, buf);
		} else if (c == 'o') {
			out = optarg;
		} else if (c == 'k') {
			secret = optarg;
		} else {
			jc__strv_clear(&args);
			sub_usage(stderr, "export");
			return 2;
		}
	}
	if (!out || optind < argc) {
		jc__strv_clear(&args);
		sub_usage(stderr, "export");
		return 2;
	}
	uint8_t *key;
	size_t key_len;
	if (jc__bundle_secret(secret, 1, &key, &key_len, err, sizeof(err)) != 0) {
		jc__strv_clear(&args);
		return die(1, "export: %s", err);
	}
	struct jc_admin_reply reply = {0};
	rc = admin("export", &args, 1, &reply);
	jc__strv_clear(&args);
	if (rc == 0 && reply.status != 0)
		rc = die(1, "export: %s", reply.message ? reply.message : jc_strerror(reply.status));
	struct jc_blob *reqs = calloc(reply.n_rec ? reply.n_rec : 1, sizeof(*reqs));
	const char *identity = reply.n_rec ? gets_(&reply.rec[0], "versions") : "";
	for (size_t i = 0; rc == 0 && i < reply.n_rec; i++)
		if (!reqs || unhex(gets_(&reply.rec[i], "request"), &reqs[i]) != 0)
			rc = die(1, "export: a bad request record from the daemon");
	if (rc == 0 && jc__bundle_write(out, key, key_len, identity, reqs, reply.n_rec, err,
					sizeof(err)) != 0)
		rc = die(1, "export: %s", err);
	if (rc == 0) {
		printf("exported %zu requests to %s\n", reply.n_rec, out);
		if (reply.message)
			fprintf(stderr, "%s\n", reply.message);
	}
	for (size_t i = 0; reqs && i < reply.n_rec; i++)
		free(reqs[i].data);
	free(reqs);
	sodium_memzero(key, key_len);
	free(key);
	jc__admin_reply_clear(&reply);
	return rc;
}

/* Compiles the n requests through the daemon; counts by outcome. */
static int import_run(struct jc_req *reqs, size_t n, int show)
{
	jc_client *cl = NULL;
	if (open_client(2, &cl) != 0)
		return die(1, "import: %s", jc_client_errmsg(NULL));
	uint64_t hit = 0, fleet = 0, compiled = 0, failed = 0;
	struct jc_progress p;
	jc__progress_init(&p, stdout, "import");
	for (size_t i = 0; i < n; i++) {
		jc_request *r = NULL;
		jc_result *res = NULL;
		int rc = jc_request_new(&r);
		if (rc == 0) {
			jc__req_clear(&r->req);
			r->req = reqs[i];
			memset(&reqs[i], 0, sizeof(reqs[i]));
			/* A tree another machine's client read: this client reads its own. */
			jc__req_tree_clear(&r->req);
			rc = jc_compile(cl, r, &res);
		}
		jc_cache_status st = rc == 0 ? jc_result_cache_status(res) : JC_MISS;
		if (rc != 0) {
			failed++;
			fprintf(stderr, "import: request %zu (%s): %s\n", i + 1,
				r && r->req.source_name ? r->req.source_name : "?",
				jc_client_errmsg(cl));
		} else if (st == JC_HIT) {
			hit++;
		} else if (st == JC_REMOTE_HIT) {
			fleet++; /* another machine's compile, verified: none ran here */
		} else {
			compiled++;
		}
		jc_result_free(res);
		jc_request_free(r);
		if (show)
			jc__progress_show(&p, hit + fleet + compiled, failed, n, i + 1 == n);
	}
	jc_client_close(cl);
	if (show)
		printf("imported %zu requests: %" PRIu64 " were there, %" PRIu64 " from the fleet tier, "
		       "%" PRIu64 " compiled, %" PRIu64 " failed\n", n, hit, fleet, compiled, failed);
	return failed ? 1 : 0;
}

static int cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
		{"wait", no_argument, NULL, 'w'}, {"secret-file", required_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	const char *secret = NULL;
	int c, wait = 0;
	char err[1024];
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'w') {
			wait = 1;
		} else if (c == 'k') {
			secret = optarg;
		} else {
			sub_usage(stderr, "import");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		sub_usage(stderr, "import");
		return 2;
	}
	uint8_t *key;
	size_t key_len, n;
	struct jc_req *reqs;
	char *identity = NULL;
	if (jc__bundle_secret(secret, 0, &key, &key_len, err, sizeof(err)) != 0)
		return die(1, "import: %s", err);
	int rc = jc__bundle_read(argv[optind], key, key_len, &reqs, &n, &identity, err, sizeof(err));
	sodium_memzero(key, key_len);
	free(key);
	if (rc != 0)
		return die(1, "import: %s", err);
	printf("%s: %zu signed requests (exported by %s)\n", argv[optind], n, identity);
	free(identity);
	fflush(stdout);
	pid_t pid = wait ? 0 : fork();
	if (pid > 0) {
		printf("importing in the background (pid %d); `jitcachectl stats` shows the entries\n",
		       (int)pid);
	} else if (pid == 0) {
		if (!wait)
			setsid();
		rc = import_run(reqs, n, wait);
	} else {
		rc = die(1, "import: cannot start in the background: %s", strerror(errno));
	}
	for (size_t i = 0; i < n; i++)
		jc__req_clear(&reqs[i]);
	free(reqs);
	if (pid == 0 && !wait)
		_exit(rc);
	return rc;
}

/* The cache directory in use: --cache-dir, else the one the daemon reached
 * serves (its stats say), else the default. 0 or -1 (none). */
static int daemon_cache_dir(char *dir, size_t len)
{
	struct jc_admin_reply rep = {0};
	if (cache_dir)
		return snprintf(dir, len, "%s", cache_dir) < (int)len ? 0 : -1;
	int rc = admin("stats", NULL, 1, &rep) == 0 && rep.status == 0 && rep.n_rec &&
			 *gets_(&rep.rec[0], "cache_dir")
		     ? (snprintf(dir, len, "%s", gets_(&rep.rec[0], "cache_dir")) < (int)len ? 0 : -1)
		     : jc__default_cache_dir(dir, len);
	jc__admin_reply_clear(&rep);
	return rc;
}

/* The object of key's entry (admin "show" for its hash and size, then the
 * file in the cache directory, checked against its hash): *data malloc'd. */
static int entry_bytes(const char *key, uint8_t **data, size_t *size)
{
	struct jc_strv args = {0};
	struct jc_admin_reply rep = {0};
	char arg[64], dir[4096], path[4200];
	uint8_t hash[16];
	snprintf(arg, sizeof(arg), "key=%s", key);
	jc__strv_push(&args, arg);
	int rc = admin("show", &args, 1, &rep);
	free(args.v ? args.v[0] : NULL);
	free(args.v);
	if (rc != 0)
		return rc;
	const char *obj = rep.n_rec ? gets_(&rep.rec[0], "object") : "";
	int64_t want = rep.n_rec ? geti(&rep.rec[0], "size") : 0;
	if (rep.status != 0)
		rc = die(1, "inspect: %s", rep.message ? rep.message : jc_strerror(rep.status));
	else if (jc__unhex16(obj, hash) != 0)
		rc = die(1, "inspect: entry %s holds no artifact (a cached compile failure)", key);
	else if (daemon_cache_dir(dir, sizeof(dir)) != 0)
		rc = die(2, "inspect: no cache directory (--cache-dir DIR)");
	if (rc == 0) {
		snprintf(path, sizeof(path), "%s/objects/%.2s/%s", dir, obj, obj);
		XXH128_canonical_t c;
		if (read_file(path, data, size) != 0)
			rc = die(1, "inspect: cannot read %s: %s (the cache directory is the daemon's "
				 "uid's)", path, strerror(errno));
		else if (XXH128_canonicalFromHash(&c, XXH3_128bits(*data, *size)),
			 (int64_t)*size != want || memcmp(c.digest, hash, 16) != 0)
			rc = die(1, "inspect: %s does not match its entry (size or hash): `jitcachectl "
				 "verify` quarantines it", path);
	}
	jc__admin_reply_clear(&rep);
	return rc;
}

static int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'}, {"key", required_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	const char *key = NULL;
	int json = 0, c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = 1;
		else if (c == 'k')
			key = optarg;
		else
			return die(2, "usage: inspect FILE | --key KEY [--json]");
	}
	if ((key != NULL) == (optind < argc) || optind + 1 < argc)
		return die(2, "usage: inspect FILE | --key KEY [--json]");
	uint8_t *data = NULL;
	size_t size = 0;
	char source[128], err[512];
	int rc;
	if (key) {
		snprintf(source, sizeof(source), "key %s", key);
		if ((rc = entry_bytes(key, &data, &size)) != 0)
			return rc;
	} else if (read_file(argv[optind], &data, &size) != 0) {
		return die(2, "cannot read %s: %s", argv[optind], strerror(errno));
	}
	rc = jc__inspect_print(stdout, key ? source : argv[optind], data, size, json, err, sizeof(err));
	free(data);
	return rc ? die(1, "inspect %s: %s", key ? source : argv[optind], err) : 0;
}

static void print_config(const char *name, const char *value, const char *source, void *ctx)
{
	(void)ctx;
	printf("(%s) %s = %s\n", source, name, value);
}

/* `config`: what the client library would use, and where each value came
 * from, in the manner of `ccache -p`. */
static int cmd_config(void)
{
	jc_options *o = NULL;
	jc_client *c = NULL;
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, socket_path);
	rc = rc ?: jc_options_set_cache_dir(o, cache_dir);
	rc = rc ?: jc__client_new(o, &c);
	if (rc != 0) {
		jc_options_free(o);
		return die(1, "%s", jc_client_errmsg(NULL));
	}
	jc__client_search(c);
	jc__client_config(o, c, print_config, NULL);
	jc_client_close(c);
	jc_options_free(o);
	return 0;
}

/* `stop`: the daemon stops as on SIGTERM, after answering. */
static int cmd_stop(void)
{
	struct jc_admin_reply reply = {0};
	int rc = admin("stop", NULL, 0, &reply);
	if (rc == 0 && reply.status != 0)
		rc = die(1, "stop: %s", reply.message ? reply.message : jc_strerror(reply.status));
	else if (rc == 0)
		fprintf(stderr, "%s\n", reply.message ? reply.message : "stopping");
	jc__admin_reply_clear(&reply);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'}, {"cache-dir", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket_path = optarg;
			break;
		case 'd':
			cache_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("jitcachectl %s\n", JC_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "help") == 0) {
		if (argc > 1 && !find_sub(argv[1])) {
			fprintf(stderr, "jitcachectl: unknown command '%s'\n", argv[1]);
			usage(stderr);
			return 2;
		}
		if (argc > 1)
			sub_usage(stdout, argv[1]);
		else
			usage(stdout);
		return 0;
	}
	if (!find_sub(cmd)) {
		fprintf(stderr, "jitcachectl: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			sub_usage(stdout, cmd);
			return 0;
		}
	if (strcmp(cmd, "compile") == 0)
		return cmd_compile(argc, argv);
	if (strcmp(cmd, "link") == 0)
		return cmd_link(argc, argv);
	if (strcmp(cmd, "doctor") == 0) {
		/* The daemon of --cache-dir DIR, if one serves it. */
		static char sock[4096];
		char err[512];
		if (!socket_path && cache_dir && jc__dir_socket(cache_dir, sock, sizeof(sock), err, sizeof(err)) == 0)
			socket_path = sock;
		return jc__doctor(socket_path, cache_dir);
	}
	if (strcmp(cmd, "inspect") == 0)
		return cmd_inspect(argc, argv);
	if (strcmp(cmd, "warm") == 0)
		return cmd_warm(argc, argv);
	if (strcmp(cmd, "export") == 0)
		return cmd_export(argc, argv);
	if (strcmp(cmd, "import") == 0)
		return cmd_import(argc, argv);
	if (argc > 1 && (strcmp(cmd, "config") == 0 || strcmp(cmd, "stop") == 0)) {
		fprintf(stderr, "jitcachectl: unexpected argument '%s'\n", argv[1]);
		sub_usage(stderr, cmd);
		return 2;
	}
	if (strcmp(cmd, "config") == 0)
		return cmd_config();
	if (strcmp(cmd, "stop") == 0)
		return cmd_stop();
	return cmd_admin(cmd, argc, argv);
}
