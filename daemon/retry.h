/* SPDX-License-Identifier: MIT */
/*
 * The bound on recompiles asked for by load-failure reports: a client that
 * could not load a served artifact (jc_report_load_failure) makes the daemon
 * quarantine the object and compile the key afresh, at most
 * JC_LOAD_RETRY_MAX times per key in any JC_LOAD_RETRY_WINDOW_S seconds.
 * Past that the existing entry is served as it is: a driver that cannot load
 * what this NVRTC produces would otherwise make every report a compile.
 *
 * The table is in memory only (a restart forgets it) and holds at most
 * JC_LOAD_RETRY_KEYS keys with a recompile inside the window; when it is
 * full, further keys get no recompile until entries age out (a flood of
 * reports for many keys cannot turn into a flood of compiles either).
 * Loop thread only: not thread-safe.
 */
#ifndef JC_RETRY_H
#define JC_RETRY_H

#include <stdint.h>

#define JC_LOAD_RETRY_MAX      3    /* recompiles per key ... */
#define JC_LOAD_RETRY_WINDOW_S 600  /* ... in any window this long (seconds) */
#define JC_LOAD_RETRY_KEYS     4096 /* keys tracked at once */

struct jc_retry;

/* Allocates an empty table into *out (owned by the caller, jc__retry_free).
 * Returns 0 or JC_ENOMEM. */
int jc__retry_new(struct jc_retry **out);
/* Frees t; NULL is accepted. */
void jc__retry_free(struct jc_retry *t);

/*
 * Asks for one recompile of key (16 bytes, borrowed) at now_s (seconds, any
 * clock that does not go back). Returns 1 and records it when fewer than
 * JC_LOAD_RETRY_MAX recompiles of key fall in (now_s - JC_LOAD_RETRY_WINDOW_S,
 * now_s]; returns 0 (nothing recorded) when the key is over its bound or the
 * table is full of keys still inside their window.
 */
int jc__retry_take(struct jc_retry *t, const uint8_t key[16], int64_t now_s);

#endif
