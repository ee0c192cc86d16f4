/* SPDX-License-Identifier: MIT */
/*
 * Test harness for tests that run real processes: a real jitcached on a
 * mkdtemp cache directory, real jitcachectl runs, and helpers to read files.
 * Paths come from the environment Meson sets: JITCACHED, JITCACHECTL,
 * JITCACHE_WORKER, JC_EXAMPLES. Not thread-safe.
 */
#ifndef JC_TEST_HARNESS_H
#define JC_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jitcache/jitcache.h"

struct jc_test_daemon {
	char dir[64];     /* temp root: cache at dir/cache, socket at dir/sock */
	char cache[96];
	char sock[96];
	pid_t pid;
	char log[96];     /* daemon stderr */
};

/* Makes a fresh temp root (not started) in $TMPDIR, else /tmp; with
 * JC_TEST_KEEP set, cleanup leaves it (and the daemon's log) in place. */
void jct_daemon_init(struct jc_test_daemon *d);
/* cmocka setup/teardown of a fixture that is one jc_test_daemon (*state):
 * allocated and initialised; cleaned up and freed. */
int jct_setup(void **state);
int jct_teardown(void **state);
/* Starts jitcached with the extra flags (NULL-terminated, may be NULL) and
 * waits until it answers a ping (fails the test after 20 s). */
void jct_daemon_start(struct jc_test_daemon *d, const char *const *extra);
/* Starts without waiting; returns the pid. */
pid_t jct_daemon_spawn(struct jc_test_daemon *d, const char *const *extra);
/* Starts jitcached --cache-dir CACHE --socket SOCK FLAGS... (flags
 * NULL-terminated, may be NULL; no --log-level unless given) with stdout and
 * stderr to d->log, without waiting. In the child, before exec, calls
 * child_setup(ctx) when not NULL (descriptors, environment, limits); a
 * non-zero return is the child's exit status. Returns the pid (also d->pid). */
pid_t jct_daemon_spawn_with(struct jc_test_daemon *d, const char *const *flags,
			    int (*child_setup)(void *ctx), void *ctx);
/* Waits until the daemon answers a connection (fails the test after 20 s or
 * when it exits first). */
void jct_daemon_wait_ready(struct jc_test_daemon *d);
/* SIGTERM and wait; returns the exit status (or -signal). */
int jct_daemon_stop(struct jc_test_daemon *d);
/* Waits for the daemon to exit by itself; returns its exit status (or -signal). */
int jct_daemon_wait(struct jc_test_daemon *d);
/* SIGKILL and reap. */
void jct_daemon_kill(struct jc_test_daemon *d);
/* Stops if running and removes the temp root. */
void jct_daemon_cleanup(struct jc_test_daemon *d);

/* Runs the program argv[0] (a path) with argv, JITCACHE_SOCKET set to d's
 * socket; captures stdout and stderr (malloc'd, NUL-terminated; pass NULL
 * to drop). Returns the exit code, or 128 + the signal that killed it. */
int jct_run(const struct jc_test_daemon *d, const char *const *argv, char **out, char **err);
/* Runs jitcachectl --socket SOCK ARGS...; captures stdout and stderr
 * (malloc'd, NUL-terminated; pass NULL to drop). Returns the exit code. */
int jct_ctl(const struct jc_test_daemon *d, char **out, char **err, const char *const *args);
/* stats --json of the daemon: the integer value of key (fails if absent). */
int64_t jct_stat(const struct jc_test_daemon *d, const char *key);

/* Reads a whole file (malloc'd, NUL-terminated beyond size). */
uint8_t *jct_read_file(const char *path, size_t *size);
/* Path of an example source: $JC_EXAMPLES/name (static buffer). */
const char *jct_example(const char *name);
/* A request to compile example `file` for arch, with name expressions (NULL-terminated). */
jc_request *jct_request(const char *file, const char *arch, const char *const *exprs);
/* A request for source text given inline. */
jc_request *jct_request_src(const char *name, const char *src, const char *arch);
/* cmocka setup: jct_setup, then the daemon started with no extra flags
 * (jct_teardown stops it and removes the root). */
int jct_setup_started(void **state);
/* Connects to d (fails the test otherwise). */
jc_client *jct_connect(const struct jc_test_daemon *d);
/* Compiles r through a fresh connection to d, asserting jc_compile returns
 * want_rc; returns the result (caller frees; NULL when there is none). */
jc_result *jct_compile(const struct jc_test_daemon *d, const jc_request *r, int want_rc);

/* Writes size bytes to path (fails the test otherwise). */
void jct_write_file(const char *path, const void *data, size_t size);
/* Runs a shell command made from fmt; returns its exit status (-1: killed). */
int jct_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* nvcc: $NVCC, else $CUDA_PATH/bin/nvcc, else /usr/local/cuda/bin/nvcc, if
 * executable; NULL otherwise (static buffer). */
const char *jct_nvcc(void);
/* The SM number of a CUDA ELF (EF_CUDA_SM: e_flags bits 8..15 of the ELF ABI
 * version 8 cubins CUDA 13 writes, as `readelf -h` shows); fails the test
 * when data is not an EM_CUDA ELF. */
int jct_cubin_sm(const uint8_t *data, size_t size);
/* Sleeps past the daemon's settle margin for files written just now (100 ms
 * with nanosecond timestamps, as here): see common/includes.h. */
void jct_settle(void);

/* jct_compile, and the connection's last message (jc_client_errmsg) copied
 * to msg (msglen bytes) when msg is not NULL. */
jc_result *jct_compile_msg(const struct jc_test_daemon *d, const jc_request *r, int want_rc,
			   char *msg, size_t msglen);
/* A plain socket connected to d's (for tests that speak raw bytes). */
int jct_raw_connect(const struct jc_test_daemon *d);
/* How many times the daemon's log holds s (0 when there is no log). */
int jct_log_count(const struct jc_test_daemon *d, const char *s);
/* CLOCK_MONOTONIC in seconds. */
double jct_now_s(void);

/* Headers on disk (tests of -I trees). Writes d->dir/rel, making its
 * directories. */
void jct_put(const struct jc_test_daemon *d, const char *rel, const char *text);
/* A PTX compile of src (as k.cu, compute_90) with -I d->dir/DIR declared for
 * each of dirs (NULL-terminated). */
jc_request *jct_request_ptx_dirs(const struct jc_test_daemon *d, const char *src,
				 const char *const *dirs);
/* Compiles r; asserts the cache status st and that the PTX holds the literal
 * want (so a stale hit is seen). The result is the caller's. */
jc_result *jct_expect_ptx(const struct jc_test_daemon *d, const jc_request *r, jc_cache_status st,
			  const char *want);

#endif
