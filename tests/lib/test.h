/* SPDX-License-Identifier: MIT */
/*
 * The cmocka layer of tests/lib (see tests/README.md): thin wrappers over
 * core.h that fail the running test where the core returns an error, and
 * the helpers of tests that run real processes: a real jitcached on a
 * temporary cache directory, jitcachectl runs, client requests, the daemon's
 * statistics and log. Paths come from the environment Meson sets:
 * JITCACHED, JITCACHECTL, JITCACHE_WORKER, JC_EXAMPLES. With JC_TEST_KEEP
 * set, temporary roots (and the daemon's log) are left in place. Not
 * thread-safe. "Fails the test" means a cmocka failure (longjmp out).
 *
 * Functions that cannot fail are not wrapped: tests call the core's
 * jtl_now_s, jtl_read_file, jtl_file_count, jtl_wait, jtl_daemon_stop,
 * jtl_daemon_wait and jtl_daemon_kill directly.
 */
#ifndef JC_TESTLIB_TEST_H
#define JC_TESTLIB_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "core.h"
#include "jitcache/jitcache.h"

/* --- temporary directories ------------------------------------------------ */

/* jtl_tmpdir into root (JTL_ROOT_MAX bytes) under parent (NULL: $TMPDIR or
 * /tmp); fails the test on error. */
void jct_tmpdir(char root[JTL_ROOT_MAX], const char *parent, const char *tag);
/* Removes root and everything below (jtl_rmtree), unless JC_TEST_KEEP is
 * set; fails the test when it cannot. */
void jct_tmpdir_remove(const char *root);

/* --- the daemon under test ------------------------------------------------ */

/* jtl_daemon_init with $JITCACHED (fails the test when unset or on error). */
void jct_daemon_init(struct jtl_daemon *d);
/* cmocka setup/teardown of a fixture that is one jtl_daemon (*state):
 * allocated and initialised; killed, its root removed and freed. */
int jct_setup(void **state);
int jct_teardown(void **state);
/* jct_setup, then the daemon started with no extra flags. */
int jct_setup_started(void **state);
/* Spawns jitcached --log-level info EXTRA... (NULL-terminated, may be NULL)
 * without waiting; returns the pid. */
pid_t jct_daemon_spawn(struct jtl_daemon *d, const char *const *extra);
/* jtl_daemon_spawn with exactly these flags (no --log-level unless given);
 * fails the test when $JITCACHE_WORKER is unset (the daemon inherits it) or
 * fork fails. Returns the pid. */
pid_t jct_daemon_spawn_with(struct jtl_daemon *d, const char *const *flags,
			    int (*child_setup)(void *ctx), void *ctx);
/* Waits until the daemon answers a handshake (polling every 10 ms); fails
 * the test after 20 s or when it exits first. */
void jct_daemon_wait_ready(struct jtl_daemon *d);
/* jct_daemon_spawn + jct_daemon_wait_ready. */
void jct_daemon_start(struct jtl_daemon *d, const char *const *extra);
/* Kills the daemon and removes its root (JC_TEST_KEEP: keeps it); a root
 * that cannot be removed is reported on stderr. */
void jct_daemon_cleanup(struct jtl_daemon *d);
/*
 * Starts d's jitcached as user (its group group, gid gid, no other groups;
 * setpriv), as a system daemon would run: HOME=/nonexistent, no XDG_*
 * directories, its stderr in d->dir/daemon.log. d->dir is made 0711, the
 * cache directory 0700 and the socket's, d->dir/run (d->sock is
 * d->dir/run/sock), 0750 for a shared daemon (--group-shared yes) else
 * 0700, both the user's; flags (NULL-terminated, may be NULL) follow
 * --workers 1 --log-level info. Waits until `jitcachectl ping` run as
 * client (in group) answers; fails the test when the daemon exits first or
 * after 30 s. d->pid is its pid; stop it with jct_daemon_stop_as.
 */
void jct_daemon_start_as(struct jtl_daemon *d, const char *user, const char *group, gid_t gid,
			 int shared, const char *client, const char *const *flags);
/* `jitcachectl stop`, then waits for the daemon (SIGKILL after 10 s). */
void jct_daemon_stop_as(struct jtl_daemon *d);
/* sh -c SCRIPT (formatted) as user, in group (gid: its only supplementary
 * group) with setpriv; stdout and stderr together into *out (malloc'd,
 * never NULL), through a file in dir. Returns the exit status. */
int jct_as_user(const char *dir, const char *user, const char *group, gid_t gid, char **out,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* --- processes ------------------------------------------------------------ */

/* Runs argv[0] (a path) with JITCACHE_SOCKET set to d's socket (jtl_run,
 * scratch files in d->dir); *out / *err as there. Returns the exit code, or
 * 128 + the signal that killed it; fails the test when fork fails. */
int jct_run(const struct jtl_daemon *d, const char *const *argv, char **out, char **err);
/* Runs $JITCACHECTL --socket SOCK --cache-dir CACHE ARGS... like jct_run. */
int jct_ctl(const struct jtl_daemon *d, char **out, char **err, const char *const *args);
/* jct_ctl, failing the test (with the command, both outputs) unless it
 * exits with want; returns its stdout (malloc'd); stderr to *err unless NULL. */
char *jct_ctl_expect(const struct jtl_daemon *d, int want, char **err, const char *const *args);
/* Replaces the object file at path by one of n bytes of other content, of
 * the same owner and mode, renamed over it: only the content tells. 0, or -1
 * when path is not there (purged meanwhile) or the rename failed. */
int jct_replace_object(const char *path, size_t n);
/* Runs a shell command made from fmt; returns its exit status (-1: killed). */
int jct_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs the group tests (n of them) as "auto" with *confinement unchanged, then
 * again as "userns" with *confinement = "userns" where this kernel lets an
 * unprivileged user+mount namespace be made (else says on stderr that the
 * group is skipped). Returns the groups' failures or'ed. */
int jct_run_confinement_groups(const struct CMUnitTest *tests, size_t n, const char **confinement);

/* --- statistics, JSON and the daemon's log -------------------------------- */

/* The integer / number after "key": in json; fails the test when absent. */
int64_t jct_json_int(const char *json, const char *key);
double jct_json_num(const char *json, const char *key);
/* `stats --json` of d: the integer value of key (fails the test if absent). */
int64_t jct_stat(const struct jtl_daemon *d, const char *key);
/* Polls stat name every 50 ms until want(value, arg) holds, up to
 * timeout_ms; returns the last value. jct_le / jct_ge: value <= / >= arg. */
int64_t jct_wait_stat(const struct jtl_daemon *d, const char *name,
		      int (*want)(int64_t value, int64_t arg), int64_t arg, int timeout_ms);
int jct_le(int64_t value, int64_t arg);
int jct_ge(int64_t value, int64_t arg);
/* The daemon's log (malloc'd); fails the test when there is none. */
char *jct_log(const struct jtl_daemon *d);
/* How many times the daemon's log holds s (0 when there is no log). */
int jct_log_count(const struct jtl_daemon *d, const char *s);
/* Polls the log every 20 ms, up to timeout_ms, for text; 1 when it appeared. */
int jct_wait_log(const struct jtl_daemon *d, const char *text, int timeout_ms);
/* Fails the test (printing text) unless text contains want. */
void jct_assert_has(const char *text, const char *want);

/* --- files ---------------------------------------------------------------- */

/* jtl_write_file; fails the test on error. */
void jct_write_file(const char *path, const void *data, size_t size);
/* jct_write_file of a NUL-terminated text. */
void jct_write_text(const char *path, const char *text);
/* Writes text to root/rel, making the directories below root (0755). */
void jct_put(const char *root, const char *rel, const char *text);
/* Sleeps past the daemon's settle margin for files written just now (100 ms
 * with nanosecond timestamps, as here): see common/includes.h. */
void jct_settle(void);

/* --- requests through the client library ---------------------------------- */

/* Path of an example source: $JC_EXAMPLES/name (static buffer). */
const char *jct_example(const char *name);
/* A request for source text given inline / for example `file`, with name
 * expressions (NULL-terminated, may be NULL). The caller frees it. */
jc_request *jct_request_src(const char *name, const char *src, const char *arch);
jc_request *jct_request(const char *file, const char *arch, const char *const *exprs);
/* Adds the option -IDIR to r and declares dir as an include directory. */
void jct_request_include(jc_request *r, const char *dir);
/* A PTX compile of src (as k.cu, compute_90) with -I d->dir/DIR declared for
 * each of dirs (NULL-terminated). */
jc_request *jct_request_ptx_dirs(const struct jtl_daemon *d, const char *src,
				 const char *const *dirs);
/* Connects to d (fails the test otherwise). */
jc_client *jct_connect(const struct jtl_daemon *d);
/* A plain socket connected to d's (for tests that speak raw bytes). */
int jct_raw_connect(const struct jtl_daemon *d);
/* jct_raw_connect, then the handshake (HELLO, HELLO_OK expected): the
 * socket, ready for a request frame (fails the test otherwise). */
int jct_raw_hello(const struct jtl_daemon *d);
struct jc_hello;
/* The same in protocol version; when ok is not NULL, the HELLO_OK decoded
 * into *ok (jc__hello_clear it), its version checked. */
int jct_raw_hello_version(const struct jtl_daemon *d, uint32_t version, struct jc_hello *ok);
/* Compiles r through a fresh connection to d, asserting jc_compile returns
 * want_rc; returns the result (caller frees; NULL when there is none). */
jc_result *jct_compile(const struct jtl_daemon *d, const jc_request *r, int want_rc);
/* jct_compile, and the connection's last message (jc_client_errmsg) copied
 * to msg (msglen bytes) when msg is not NULL. */
jc_result *jct_compile_msg(const struct jtl_daemon *d, const jc_request *r, int want_rc, char *msg,
			   size_t msglen);
/* Compiles r; asserts the cache status st and that the PTX holds the literal
 * want (so a stale hit is seen). The result is the caller's. */
jc_result *jct_expect_ptx(const struct jtl_daemon *d, const jc_request *r, jc_cache_status st,
			  const char *want);

/* Compiles src (borrowed) as name for arch; fails the test unless
 * jc_compile returns want_rc (0, or the JC_E* expected). key_out (33 bytes,
 * may be NULL) gets the key. Returns the cache status. */
jc_cache_status jct_compile_src(const struct jtl_daemon *d, const char *name, const char *src,
				const char *arch, int want_rc, char key_out[33]);
/* The source of tiny kernel n: every n gives a distinct artifact of the same
 * size (only an immediate changes). Static buffer. */
const char *jct_tiny_src(int n);
/* Compiles tiny kernel n (as tinyN.cu) for arch (fails the test on error);
 * key_out (33 bytes, may be NULL) gets its key. Returns the cache status. */
jc_cache_status jct_compile_tiny(const struct jtl_daemon *d, int n, const char *arch,
				 char key_out[33]);
/* Compiles a source with a real NVRTC compile error for sm_90; fails the
 * test unless jc_compile says JC_ECOMPILE. key_out as above. Returns the
 * cache status (JC_MISS, then JC_NEGATIVE_HIT). */
jc_cache_status jct_compile_failure(const struct jtl_daemon *d, char key_out[33]);

/* --- the cache directory -------------------------------------------------- */

/* Keys of `ls --json`, in its order, into keys (at most max); returns how many. */
size_t jct_ls_keys(const struct jtl_daemon *d, char (*keys)[33], size_t max);
/* 1 when key is listed by `ls --json`. */
int jct_listed(const struct jtl_daemon *d, const char *key);
/* Sets created and last_access (unix seconds) of entry key in the cache's
 * index, through the index code. The daemon must not be running. */
void jct_set_times(const char *cache, const char *key, int64_t created, int64_t last_access);
/* XXH3-128 of data[0..n) in hex: the name of the object holding those bytes. */
void jct_hash_hex(const void *data, size_t n, char hex[33]);
/* Path of the object file that holds bytes data[0..n): CACHE/objects/ab/<hash>
 * (XXH3-128 of the bytes; static buffer). */
const char *jct_object_path(const char *cache, const void *data, size_t n);

/* --- unix accounts made for the run --------------------------------------- */

/* Makes group PREFIX<pid> (groupadd): its name into name (32 bytes), its
 * gid into *gid (may be NULL). Returns 0, or -1 when it cannot be made. */
int jct_group_add(const char *prefix, char name[32], gid_t *gid);
/* Makes user PREFIX<pid> (useradd: no home directory made, home
 * /nonexistent, shell nologin) whose primary group is group, or a new group
 * of its own name when group is NULL: its name into name (32 bytes), uid and
 * primary gid into *uid / *gid (each may be NULL). Returns 0, or -1 when it
 * cannot be made. Names hold the pid, so parallel runs never collide.
 * The first call in a process also makes $JITCACHED, $JITCACHECTL and
 * $JITCACHE_WORKER reachable for other uids: where a directory above them
 * is not searchable by others (a build in a 0700 directory) they are copied
 * to a 0755 directory under $TMPDIR and the variables changed to the
 * copies; read them after this call. */
int jct_user_add(const char *prefix, const char *group, char name[32], uid_t *uid, gid_t *gid);
/* Removes every user, then every group, this process made (userdel,
 * groupdel); registered with atexit by the first jct_group_add or
 * jct_user_add, and safe to call again. */
void jct_users_remove(void);

/* --- artifacts and tools -------------------------------------------------- */

/* nvcc: $NVCC, else $CUDA_PATH/bin/nvcc, else /usr/local/cuda/bin/nvcc, if
 * executable; NULL otherwise (static buffer). */
const char *jct_nvcc(void);
/* The SM number of a CUDA ELF (EF_CUDA_SM: e_flags bits 8..15 of the ELF ABI
 * version 8 cubins CUDA 13 writes, as `readelf -h` shows); fails the test
 * when data is not an EM_CUDA ELF. */
int jct_cubin_sm(const uint8_t *data, size_t size);

#endif
