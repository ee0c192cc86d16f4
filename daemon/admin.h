/* SPDX-License-Identifier: MIT */
/*
 * Admin commands (stats, ls, show, purge, verify, gc, ping, version) over a
 * store and an index. The daemon runs them in its thread pool; jitcachectl
 * runs the same code on the directory when no daemon runs (holding
 * DIR/lock), so both paths give the same answers.
 *
 * Requests are a command word plus "name" or "name=value" arguments (see
 * proto/PROTOCOL.md); replies are records of named int/string fields.
 * Not thread-safe: one call at a time per env (the daemon holds its writer
 * lock around it).
 */
#ifndef JC_ADMIN_H
#define JC_ADMIN_H

#include <stdint.h>

#include "counters.h"
#include "index.h"
#include "proto.h"
#include "store.h"
#include "toolchain.h"

struct jc_admin_env {
	/* in (borrowed) */
	struct jc_store *store;
	struct jc_index *ix;
	const struct jc_toolchain *tc;
	uint64_t counters[JC_CTR__COUNT]; /* the daemon's, or the stored ones offline */
	int64_t uptime_s;                 /* -1 offline */
	uint64_t max_size;                /* byte budget */
	int64_t daemon_pid;               /* 0 offline */
	const char *socket_path;
	/* out: what the caller must apply to its own state */
	int removed;        /* entries were removed: drop in-memory copies */
	uint64_t evicted;   /* entries removed by budget eviction */
	uint64_t corrupt;   /* objects found corrupt and quarantined */
	int zero_counters;  /* `stats zero`: reset counters */
};

/*
 * Runs one command. Always fills out (status 0, or a JC_E code and message
 * for unknown commands/arguments and failures). Returns out->status.
 */
int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out);

/* 1 if the command reveals or changes other users' entries (ls, show, purge,
 * gc, verify, stats zero): limited to root, the daemon's uid and the admin group. */
int jc__admin_is_privileged(const struct jc_admin_req *req);

/* Removes least-recently-used ok entries until the bytes of ok entries are
 * at most target; adds the count to *evicted. Used by the daemon's budget. */
int jc__admin_evict_to(struct jc_admin_env *env, uint64_t target, uint64_t *evicted);

/* Loads the stored counters into counters[] (by name; unknown names are
 * ignored, missing ones stay as they were). Returns 0 or an index error. */
int jc__counters_load_array(struct jc_index *ix, uint64_t counters[JC_CTR__COUNT]);

#endif
