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

#include "core/counters.h"
#include "core/request.h"
#include "core/tier.h"
#include "core/toolchain.h"
#include "proto/proto.h"

/* Most records one reply lists (a reply is one frame of at most
 * JC_FRAME_MAX bytes); the message says how many more there were. */
#define JC_ADMIN_LIST_MAX 100000

struct jc_admin_env {
	/* in (borrowed) */
	struct jc_cachedir *cd; /* the cache directory: its local tier (tier.h) */
	const struct jc_toolchain *tc;
	struct jc_req_policy *policy; /* the daemon's admission (request.h); NULL offline */
	/* Who asks: all_users for an admin (root, the daemon's uid, the admin
	 * group; every offline caller, who holds the directory itself), who sees
	 * and changes every entry; else ls, show, stats and purge see only the
	 * entries uid uses (index.h, "who used an entry"). */
	uint32_t uid;
	int all_users;
	uint64_t user_max_size;		  /* per-uid byte share; 0 = none (evict.h) */
	uint64_t counters[JC_CTR__COUNT]; /* the daemon's, or the stored ones offline */
	int64_t uptime_s;		  /* -1 offline */
	uint64_t max_size;		  /* byte budget */
	int64_t daemon_pid;		  /* 0 offline */
	const char *socket_path;
	const char *confinement; /* the workers' (worker_fs.h names); NULL offline */
	/* The toolchain identity the cache recorded before the daemon started
	 * (tier.h, jc__cachedir_identity); NULL offline (read from the index). */
	const char *cache_identity;
	int keep_requests; /* --keep-requests (offline: 0) */
	/* Server-side hit latency since the start or `stats --zero` (0 offline). */
	uint64_t hit_samples, hit_sum_ns, hit_p50_ns, hit_p99_ns;
	int64_t hit_latency_since; /* unix time those count from (0 offline) */
	/* Include tree watches now (watch.h; 0 offline): trees, inotify
	 * watches, and the bytes the daemon holds for them. */
	uint64_t watch_trees, watch_count, watch_bytes;
	/* out: what the caller must apply to its own state */
	int removed;	       /* entries were removed: drop in-memory copies */
	uint64_t evicted;      /* entries removed by budget eviction */
	uint64_t user_evicted; /* a uid's entries dropped from its share (evict.h) */
	uint64_t corrupt;      /* objects found corrupt and quarantined */
	int zero_counters;     /* `stats zero`: reset counters */
};

/*
 * The admin commands, in one table (the model: redis's commands.def and
 * struct redisCommand flags). The daemon dispatches through it, its access
 * check and audit log read its flags, and jitcachectl takes from it which
 * options a command has, whether it may run offline and how to print it.
 */
enum {
	/* Only for admins (root, the daemon's uid, the admin group): it reveals
	 * or changes what is not the caller's. Others are refused. */
	JC_ADMIN_PRIVILEGED = 1u << 0,
	/* Changes entries, objects or counters: logged with who asked. */
	JC_ADMIN_MUTATING = 1u << 1,
	/* jitcachectl runs it on the cache directory when no daemon answers. */
	JC_ADMIN_OFFLINE = 1u << 2,
	/* Its reply is a list of records (--json: one array). */
	JC_ADMIN_LISTS = 1u << 3,
	/* Handled by the daemon's loop itself (stop), never by jc__admin_run. */
	JC_ADMIN_LOOP = 1u << 4,
	/* An argument jitcachectl keeps to itself (how to print): never sent. */
	JC_ADMIN_LOCAL = 1u << 5,
};

/* What an argument's value is ("name=value" on the wire; a flag is "name"). */
enum jc_admin_arg_kind {
	JC_ARG_FLAG,	/* no value */
	JC_ARG_SECONDS, /* decimal seconds; jitcachectl takes a duration (90s, 2h, 7d) */
	JC_ARG_BYTES,	/* decimal bytes; jitcachectl takes a size (500M, 2G) */
	JC_ARG_KEY,	/* 32 hex digits, or a unique prefix (as git takes abbreviated ids) */
	JC_ARG_TEXT,
};

struct jc_admin_arg {
	const char *name;   /* on the wire */
	const char *option; /* jitcachectl's --option; NULL: the positional argument */
	enum jc_admin_arg_kind kind;
	unsigned flags; /* JC_ADMIN_* the command gains when it is given */
};

struct jc_admin_env;
struct jc_admin_cmd {
	const char *name;
	unsigned flags;			 /* JC_ADMIN_* */
	const struct jc_admin_arg *args; /* ended by a NULL name; NULL: none */
	/* Fills out (status 0 or a JC_E code); NULL for JC_ADMIN_LOOP. */
	int (*run)(struct jc_admin_env *env, const struct jc_admin_req *req,
		   struct jc_admin_reply *out);
	/* jitcachectl's help: the synopsis line, then what it does (lines of
	 * at most 85 columns, each ended by a newline). */
	const char *help;
};

/* The table, jc__admin_n_cmds rows (static, read-only). */
extern const struct jc_admin_cmd jc__admin_cmds[];
extern const size_t jc__admin_n_cmds;

/* The row of name, or NULL. */
const struct jc_admin_cmd *jc__admin_find(const char *name);

/* The argument "name" of req ("" for a flag), or NULL when it is not given. */
const char *jc__admin_arg(const struct jc_admin_req *req, const char *name);

/* The argument "name" of req as a count (decimal digits only, at most
 * INT64_MAX) into *v, left alone when it is not given. 0, or JC_EINVAL
 * (empty, a sign, another character, out of range). */
int jc__admin_arg_count(const struct jc_admin_req *req, const char *name, int64_t *v);

/* The flags of req: its command's, with those of the arguments it gives.
 * An unknown command is JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING: refused to
 * non-admins, logged for admins (who are told it is unknown). */
unsigned jc__admin_flags(const struct jc_admin_req *req);

/* The option (without "--") of the first argument of req that makes it
 * privileged, for messages; "" when none does. */
const char *jc__admin_privileged_option(const struct jc_admin_req *req);

/* Checks req's command and arguments as jc__admin_run does (for the
 * JC_ADMIN_LOOP commands the daemon runs itself): 0, or the JC_E code with
 * out's status and message set. */
int jc__admin_check(const struct jc_admin_req *req, struct jc_admin_reply *out);

/*
 * Runs one command through the table. Always fills out: status 0, or a JC_E
 * code and message (an unknown command, an argument the command does not
 * take or with a bad value, a failure). Returns out->status.
 */
int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out);

#endif
