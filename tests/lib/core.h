/* SPDX-License-Identifier: MIT */
/*
 * The test-support library's core (tests/lib, see tests/README.md): no
 * cmocka, so jitcache-bench links it too. Temporary directories, clocks,
 * whole-file reads and writes, integers out of JSON text, and a real
 * jitcached on a temporary cache directory. Every function that can fail
 * returns 0 or -1 and says why in a caller's buffer (or the daemon's `why`);
 * none exits. Not thread-safe; a forked child may use none of it but the
 * clocks.
 *
 * tests/lib/test.h puts cmocka wrappers (`jct_`) on top: they fail the test
 * where these return -1.
 */
#ifndef JC_TESTLIB_CORE_H
#define JC_TESTLIB_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes of a temporary root path ($TMPDIR/jc-TAG-XXXXXX, TMPDIR at most ~40
 * bytes): small enough that ROOT/sock fits a Unix socket address. */
#define JTL_ROOT_MAX 64

/* --- temporary directories ------------------------------------------------ */

/* Makes a new private (0700) directory PARENT/jc-TAG-XXXXXX (parent NULL:
 * $TMPDIR, or /tmp when that is unset or empty) and writes its path to root
 * (len bytes). Returns 0, or -1 with the reason in why (whylen bytes) when
 * the path does not fit or mkdtemp fails. */
int jtl_tmpdir(char *root, size_t len, const char *parent, const char *tag, char *why,
	       size_t whylen);
/* Removes path and everything below it without following symbolic links,
 * first giving directories u+rwx (tests make read-only ones). A missing path
 * is not an error. Returns 0, or -1 with the first failure in why. */
int jtl_rmtree(const char *path, char *why, size_t whylen);

/* --- clocks --------------------------------------------------------------- */

/* CLOCK_MONOTONIC in seconds (jc__now_ns of common/util.h, the clock of
 * the daemon and the client, divided): comparable across processes. */
double jtl_now_s(void);
/* Sleeps ms milliseconds (resumed after signals). */
void jtl_sleep_ms(unsigned ms);
/* Sorts v[0..n) ascending (timings). */
void jtl_sort_u64(uint64_t *v, size_t n);
/* The median of v[0..n) (sorts v; the mean of the middle two when n is
 * even; 0 when n is 0). */
double jtl_median(double *v, size_t n);

/* --- files ---------------------------------------------------------------- */

/* Reads the whole file path: a malloc'd buffer (the caller frees it),
 * NUL-terminated one byte beyond *size; NULL with errno set on failure. */
uint8_t *jtl_read_file(const char *path, size_t *size);
/* Creates or truncates path (mode 0666 less the umask when new, as fopen)
 * and writes size bytes.
 * Returns 0, or -1 with the reason in why. */
int jtl_write_file(const char *path, const void *data, size_t size, char *why, size_t whylen);
/* How many times s (not empty) occurs in text, without overlaps / in the
 * file path (0 when it cannot be read). */
int jtl_count(const char *text, const char *s);
int jtl_file_count(const char *path, const char *s);

/* --- JSON text ------------------------------------------------------------ */

/* The number after the first `"key": ` in json (the daemon's and the bench's
 * JSON output: one space after the colon), as an integer / a double. Returns
 * 0, or -1 when the key is absent or no number follows. */
int jtl_json_int(const char *json, const char *key, int64_t *value);
int jtl_json_num(const char *json, const char *key, double *value);

/* --- processes ------------------------------------------------------------ */

/* Waits for pid (retried on EINTR); returns its exit code, 128 + the signal
 * that killed it, or -1 when it cannot be waited for. */
int jtl_wait(pid_t pid);
/* Runs argv[0] (a path) with argv; for each "NAME=VALUE" of env (NULL-
 * terminated, may be NULL) sets NAME in the child. Its stdout and stderr go
 * through files scratch/run.out and scratch/run.err (no pipe can fill up),
 * returned in *out and *err (malloc'd, NUL-terminated; pass NULL to drop).
 * Returns jtl_wait's value, or -1 when fork fails. */
int jtl_run(const char *const *argv, const char *const *env, const char *scratch, char **out,
	    char **err);

/* --- a daemon under test -------------------------------------------------- */

struct jtl_daemon {
	char dir[JTL_ROOT_MAX]; /* temporary root: cache/, sock, daemon.log */
	char cache[96];		/* dir/cache, the --cache-dir */
	char sock[96];		/* dir/sock, the --socket */
	char log[96];		/* dir/daemon.log: the daemon's stdout and stderr, appended */
	char bin[4096];		/* the jitcached it runs */
	pid_t pid;		/* -1 when not running (or reaped) */
	char why[512];		/* the reason of the last -1 */
};

/* The file of the libnvrtc this process finds (dlopen "libnvrtc.so",
 * dladdr, realpath) to lib[PATH_MAX]. Returns 0 or -1 (why). */
int jtl_nvrtc_file(char *lib, char *why, size_t whylen);

/*
 * Another NVRTC build with its toolkit for toolchain-change tests: the
 * libnvrtc this process finds (jtl_nvrtc_file) copied to DIR/lib with its
 * builtins and another build-id (jtl_nvrtc_copy_with_build_id, tag 0xff),
 * and DIR/include linked to the toolkit's include tree (<its dir>/../include),
 * so that with LD_LIBRARY_PATH=DIR/lib a daemon runs the same code under
 * another toolchain identity (its nvrtc_id: core/toolchain.h). DIR must
 * exist. Copies about 110 MiB (CUDA 13.0). Returns 0 or -1 (why).
 */
int jtl_nvrtc_toolkit_copy(const char *dir, char *why, size_t whylen);

/* Makes a fresh root (jtl_tmpdir, tag "test" or the caller's) for the
 * jitcached at bin (copied); nothing is started. Returns 0 or -1 (why). */
int jtl_daemon_init(struct jtl_daemon *d, const char *bin, const char *tag);
/* Forks `BIN --cache-dir CACHE --socket SOCK FLAGS...` (flags NULL-
 * terminated, borrowed, may be NULL) with stdout and stderr appended to
 * d->log, without waiting. In the child, before exec, calls child_setup(ctx)
 * when not NULL (descriptors, environment, limits); a non-zero return is the
 * child's exit status. Returns the pid (also d->pid), or -1 (why). */
pid_t jtl_daemon_spawn(struct jtl_daemon *d, const char *const *flags,
		       int (*child_setup)(void *ctx), void *ctx);
/* Polls every poll_us microseconds until the daemon answers a client
 * handshake; *ready_ms (may be NULL) gets the milliseconds waited. Returns 0,
 * or -1 (why) when it exits first (it is reaped) or timeout_ms passes. */
int jtl_daemon_wait_ready(struct jtl_daemon *d, unsigned timeout_ms, unsigned poll_us,
			  double *ready_ms);
/* Waits for the daemon to exit by itself / sends SIGTERM first; returns its
 * exit code or -signal (0 when it was not running). */
int jtl_daemon_wait(struct jtl_daemon *d);
int jtl_daemon_stop(struct jtl_daemon *d);
/* SIGKILL and reap (nothing when not running). */
void jtl_daemon_kill(struct jtl_daemon *d);
/* Kills a running daemon, then removes the root unless keep. Idempotent.
 * Returns 0, or -1 (why) when the root could not be removed. */
int jtl_daemon_cleanup(struct jtl_daemon *d, int keep);

/*
 * A second NVRTC build for tests (issue 22: the shim must compile with the
 * NVRTC the application loaded): copies the library nvrtc (a path or a
 * link, e.g. /usr/local/cuda/lib64/libnvrtc.so.13) into dir (made if
 * missing) under its soname (ELF DT_SONAME: the name the dynamic loader
 * looks for, whatever links lead to the file; else nvrtc's own file
 * name), with every byte of its
 * NT_GNU_BUILD_ID note XORed with tag (non-zero), and the
 * libnvrtc-builtins.so* files of its directory beside it (it loads them
 * when it compiles). The same code, another build-id: another identity for
 * the key, the same compiler output. out[outlen] gets the copy's path.
 * Returns 0 or -1 (why). Not thread-safe (reads whole files).
 */
int jtl_nvrtc_copy_with_build_id(const char *nvrtc, const char *dir, uint8_t tag, char *out,
				 size_t outlen, char *why, size_t whylen);

#endif
