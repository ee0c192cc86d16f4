/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the ops tests (tests/ops): tiny real kernels, jitcachectl
 * runs that must succeed, reading `ls --json` and `stats --json`, and
 * changing entry times through the real index code (daemon stopped). Built
 * on tests/harness.h. Not thread-safe.
 */
#ifndef JC_OPS_UTIL_H
#define JC_OPS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* The source of tiny kernel n: every n gives a distinct artifact of the same
 * size (only an immediate changes). Static buffer. */
const char *opst_tiny_src(int n);

/* Compiles tiny kernel n for arch through the client library (fails the
 * test on error); key_out (33 bytes, may be NULL) gets its key. Returns the
 * cache status. */
jc_cache_status opst_compile_tiny(const struct jc_test_daemon *d, int n, const char *arch,
				  char key_out[33]);

/* Compiles a source with a compile error (a real NVRTC failure) for sm_90;
 * fails the test unless jc_compile says JC_ECOMPILE. key_out as above.
 * Returns the cache status (JC_MISS, then JC_NEGATIVE_HIT). */
jc_cache_status opst_compile_failure(const struct jc_test_daemon *d, char key_out[33]);

/* Runs jitcachectl ARGS (NULL-terminated), fails the test unless it exits
 * with want; returns its stdout (malloc'd). stderr goes to *err when err is
 * not NULL (malloc'd). */
char *opst_ctl(const struct jc_test_daemon *d, int want, char **err, const char *const *args);

/* Keys of `ls --json`, in LRU order, into keys (at most max); returns how many. */
size_t opst_ls_keys(const struct jc_test_daemon *d, char (*keys)[33], size_t max);
/* 1 when key is listed by `ls --json`. */
int opst_listed(const struct jc_test_daemon *d, const char *key);

/* The integer after "name": in a JSON text (fails the test if absent). */
int64_t opst_json_int(const char *json, const char *name);

/* Sets created and last_access (unix seconds) of entry key in the cache's
 * index, through the index code. The daemon must not be running. */
void opst_set_times(const char *cache, const char *key, int64_t created, int64_t last_access);

/* Polls stats --json until name's value satisfies want(value), up to
 * timeout_ms; returns the last value. */
int64_t opst_wait_stat(const struct jc_test_daemon *d, const char *name, int (*want)(int64_t v, int64_t arg),
		       int64_t arg, int timeout_ms);
int opst_le(int64_t v, int64_t arg);
int opst_ge(int64_t v, int64_t arg);

/* Waits up to timeout_ms for text to appear in the daemon log; returns 1 if it did. */
int opst_wait_log(const struct jc_test_daemon *d, const char *text, int timeout_ms);
/* Writes text to path (fails the test on error). */
void opst_write(const char *path, const char *text);

/* Reads the daemon log (malloc'd). */
char *opst_log(const struct jc_test_daemon *d);

#endif
