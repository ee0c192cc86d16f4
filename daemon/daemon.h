/* SPDX-License-Identifier: MIT */
/*
 * jitcached internals: the daemon object and the pieces that share it.
 * Everything here runs on the main libuv loop thread unless a comment says
 * otherwise; the writer index is used from the thread pool under wlock;
 * serving threads (server.c) answer hits through jc__cache_try_hit, each
 * with its memory cache (memcache.c).
 */
#ifndef JC_DAEMON_H
#define JC_DAEMON_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/includes.h"
#include "common/req.h"
#include "common/util.h" /* jc__now_ns, jc__wall_s */
#include "core/counters.h"
#include "core/evict.h"
#include "core/latency.h"
#include "core/manifest.h"
#include "core/request.h"
#include "core/tier.h"
#include "core/toolchain.h"
#include "daemon/framer.h"
#include "daemon/loop_spin.h"
#include "daemon/pool.h"
#include "daemon/remote.h"
#include "daemon/settings.h"
#include "proto/proto.h"

struct jc_conn;
struct jc_retry;
struct jc_server;
struct jc_memcache;
struct jc_fetched;

/* A client waiting on a flight. Holds a reference on its connection. */
struct jc_waiter {
	struct jc_conn *conn;
	uint32_t cache; /* JC_CACHE_MISS for the first, JOINED for the rest */
	struct jc_strv
	    names; /* owned: a joiner's name expressions, in its order (empty: the flight's) */
	uint64_t t0;
	struct jc_waiter *next;
};

/* One compile in progress for one key: single flight. */
struct jc_flight {
	struct jc_daemon *d;
	uint8_t key[16];
	struct jc_req req; /* owned: moved from the first request */
	uid_t uid;	   /* the first request's uid: the stored row's first user */
	/* For a request with a display name (the shim's): "NAME (COMM)", COMM
	 * the first requester's process name; the entry is listed under it. */
	char *listed_name;
	struct jc_waiter *waiters;
	struct jc_flight *next; /* daemon's list of flights */
	struct jc_pool_job job; /* its compile in the worker pool (pool.h) */
	struct jc_res res;	/* the worker's result */
	uv_work_t work;		/* publish in the thread pool */
	int has_bad_object;	/* started because the row's object failed a check */
	uint8_t bad_object[16]; /* that object: its row is dropped if no new row replaces it */
	char errmsg[512];	/* publish error, or why the result was not stored */
	int publish_rc;
	/* Owned, NULL when the compile reads no file from disk: the include
	 * files its key covers, re-checked before publishing (includes.h). */
	struct jc_inc_set *inc;
	uint8_t direct[16];    /* with inc: the direct key (manifest.h) */
	uint8_t store_key[16]; /* the key the result is stored under: key, or learnt;
				* name-free: free_key or learnt, named if the name
				* is in the result (publish_work_cb) */
	int name_free;	       /* req.name_free: key is the named key of free_key */
	int name_bound;	       /* ... and the name is in the result: store_key named */
	uint8_t free_key[16];
	uint8_t base_key[16]; /* free_key's named key of the name's last component */
	int has_base_key;     /* ... when the name has a directory (progname.h) */
	int peeked;	      /* the remote tier was asked for free_key (remote_peek_cb) */
	int uncached;	      /* an include file changed: served, not stored */
	int deps_mismatch;    /* NVRTC read what the key does not cover: served, not stored */
	int time_macro;	      /* it used __DATE__, __TIME__ or __TIMESTAMP__: served, not stored */
	int learned;	      /* the key was learnt from what NVRTC read (store_key) */
	int rehashed;	      /* a header changed just before was re-read after the compile */
	int tree_missing;     /* a client-read tree lacked a file NVRTC read: fails (errmsg) */
	char learned_from[512]; /* the first access the include set missed (for the log) */
	uint8_t *record; /* learnt: its set as a manifest variant for the remote tier; owned */
	size_t record_len;
	/* A fatbin request's build (fatbin.c), NULL for others; owned, freed
	 * through fatbin_ops (fatbin.c sits above flight.c, which calls it only
	 * through them: docs/ARCHITECTURE.md, "Modules and their state"). */
	struct jc_fatbin *fatbin;
	const struct jc_fatbin_ops *fatbin_ops; /* set with fatbin (jc__fatbin_start) */
	/* The request a worker gets for this flight: &req when NULL (a fatbin's
	 * nvFatbin job points it at its own). Borrowed. */
	const struct jc_req *wreq;
	/* The request's bytes (source, headers, link inputs), charged to
	 * d->request.buffers from start to end of the flight. */
	size_t charged;
	int remote_hit; /* res came from the remote tier, not a worker */
	int background; /* started by a re-warm and no client waits: an idle job (pool.h) */
	const struct jc_toolchain *tc; /* the toolchain of its key (jc__flight_start) */
};

/* What flight.c does to a fatbin flight's build (fatbin.c): finish, in
 * jc__flight_done before the flight is logged and published (its log, its
 * lowered names; its parts count as compiles); free, when the flight is
 * freed (fb then no longer refers to it). Loop thread. */
struct jc_fatbin_ops {
	void (*finish)(struct jc_flight *f);
	void (*free)(struct jc_fatbin *fb);
};

/* What the request path (cache.c, flight.c) asks of the modules above it,
 * which register these at start-up (docs/ARCHITECTURE.md, "Modules and
 * their state": lower files never call upward). A NULL hook is not called.
 * Loop thread. */
struct jc_request_hooks {
	/* The request path's entry, for the requests a lower module makes (a
	 * fatbin's parts, fatbin.c): cache.c's jc__cache_request, registered by
	 * jc__cache_init. */
	void (*request)(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req);
	/* 1 when conn's requests are background work that no client waits
	 * for: the re-warm's (registered by jc__rewarm_new). NULL: none is. */
	int (*background)(const struct jc_daemon *d, const struct jc_conn *conn);
	/* A worker loaded another compiler than a flight's key names: probe the
	 * toolchain on disk and switch to it (main.c's toolchain recheck); why
	 * is borrowed, for the log. */
	void (*toolchain_recheck)(struct jc_daemon *d, const char *why);
};

/* The request path's own state (cache.c, cache_watch.c, keyed.c,
 * keymemo.c, flight.c, flight_check.c), d->request: made by jc__cache_init
 * (flights: by jc__flight_start, each freed at its end), freed by
 * jc__cache_free after the loop has stopped. Loop thread unless a field
 * says otherwise. */
struct jc_request_path {
	struct jc_keymemos *keymemo;	/* full keys by lookup key (keymemo.c); locks itself */
	struct jc_inc_memo *inc_memo;	/* include file hashes: thread pool, locks itself */
	struct jc_manifests *manifests; /* DIR/manifests: thread pool, locks itself */
	struct jc_watch *watch; /* include tree change notification (watch.h); locks itself */
	uv_poll_t watch_poll;	/* its descriptor, drained on the loop (cache_watch.c) */
	int watch_polling;
	struct jc_retry *load_retries; /* recompiles asked by load failures (retry.h) */
	struct jc_flight *flights;     /* the flights in progress (flight.c) */
	struct jc_request_hooks hooks; /* set by cache.c, rewarm.c and main.c (see there) */
	struct jc_memcache
	    *mc; /* the main loop's rows of hot keys, pending access times (memcache.c) */
	struct jc_req_policy policy;	    /* what this daemon admits (request.h); loop thread */
	int confinement;		    /* enum jc_confine the workers apply (worker_fs.h) */
	const struct jc_conn_ops *conn_ops; /* replies and connections (jc__server_conn_ops) */
	struct jc_budget buffers;  /* request and reply bytes; max = cfg.buffer_budget (server.c) */
	struct jc_loop_spin *spin; /* the loop's busy polling (loop_spin.h); NULL in unit tests */
};

/* The daemon's run: loop thread, except where said. */
struct jc_daemon_run {
	uint64_t start_ns;	    /* jc__now_ns() at start-up */
	uint64_t hit_latency_since; /* unix time the hit latency histogram counts from */
	int stopping;		    /* SIGTERM came: read by other threads (atomic) */
	/* Server-side time of each hit (request decoded to reply queued) since
	 * the start or the last `stats --zero`; not persisted. */
	struct jc_latency hit_latency;
};

/* Whether a request reads from disk (jc__inc_needed), by direct key. */
#define JC_NEEDED_MEMO_SLOTS 1024
struct jc_needed_memo {
	uint8_t direct[16];
	uint8_t used, needed;
};

struct jc_daemon {
	struct jc_config cfg;
	uv_loop_t *loop;
	/* The cache directory: lock, store, reader and writer index, counters
	 * (tier.h). Its writer index is used from the thread pool under its wlock. */
	struct jc_cachedir *cache;
	/* The toolchain this daemon keys and compiles with (toolchain.h):
	 * probed at start-up, replaced when it changes on disk (toolchains.c,
	 * jc__toolchains_recheck: SIGHUP, or a worker that loaded another
	 * compiler). Each one stays allocated until exit (toolchains), so a
	 * pointer taken by a request, flight or thread-pool job stays valid.
	 * Written on the loop; other threads read it with __atomic_load_n. */
	const struct jc_toolchain *tc;
	struct jc_toolchains *toolchains; /* toolchains.c's own state (toolchains.h) */
	/* The toolchain identity (summary) the cache recorded before this
	 * daemon started ("" for a new cache or one from before schema 3), read
	 * at start-up (jc__toolchains_record_identity); after a switch
	 * (jc__toolchains_recheck) the summary of the toolchain switched from.
	 * Both stay allocated until exit (toolchains). Replaced, never written
	 * in place: thread-pool jobs read the pointer they were given. Loop
	 * thread. */
	const char *cache_identity;
	struct jc_daemon_run run;	/* since when, stopping, hit latency (above) */
	struct jc_request_path request; /* the request path's own state (above) */
	struct jc_pool *pool;		/* compile workers and their queue (pool.h) */
	struct jc_rewarm *rewarm;	/* re-warm of kept requests (rewarm.c) */
	struct jc_server *server;	/* the server's state (server.h), NULL until it listens */
	struct jc_remote *remote;	/* the remote tier; NULL without --remote */
};

/* Where an internal connection's answer goes: a result (res and objfd, a
 * descriptor of its object or -1, which the sink then owns) or an error
 * (res NULL, code and message). res and message are borrowed for the call. */
typedef void (*jc_conn_sink_fn)(void *ctx, const struct jc_res *res, int objfd, int code,
				const char *message);

/*
 * What the request path (cache.c, fatbin.c) may do with a client's
 * connection: answer it, hold it while it waits, ask who it is. The daemon
 * uses the server's table (jc__server_conn_ops, server.c); unit tests give
 * their own. Loop thread only. A connection is opaque to the request path.
 */
struct jc_conn_ops {
	/* Sends a RESULT; objfd (>= 0) is passed with it and always closed. */
	void (*send_result)(struct jc_conn *c, const struct jc_res *res, int objfd);
	void (*send_error)(struct jc_conn *c, int code, const char *message);
	/* The request is answered: the connection may read its next one. */
	void (*done)(struct jc_conn *c);
	void (*ref)(struct jc_conn *c);
	void (*unref)(struct jc_conn *c);
	/* 1 when no one can take c's answer any more: the client closed its end
	 * (seen without reading, which is paused while a request waits), or c is
	 * closing; then c is closed. 0 for a live one, and for internal ones. */
	int (*gone)(struct jc_conn *c);
	/* The peer's uid (SO_PEERCRED; (uid_t)-1 when unknown) and pid (for logs). */
	uid_t (*uid)(const struct jc_conn *c);
	pid_t (*pid)(const struct jc_conn *c);
	/* A connection with no socket, for requests the daemon makes itself (the
	 * parts of a fatbin, fatbin.c; re-warm compiles, rewarm.c): it has
	 * like's credentials, or with like NULL uid's (no group, the daemon's
	 * pid), and its answers go to sink(ctx, ...), once per request handed
	 * to jc__cache_request, before the request path is done with it. One
	 * reference, the caller's: unref frees it. NULL when out of memory. */
	struct jc_conn *(*internal)(struct jc_daemon *d, const struct jc_conn *like, uid_t uid,
				    jc_conn_sink_fn sink, void *ctx);
	/* key's entry was just stored (called before its answers are sent):
	 * whoever serves hits elsewhere (the serving threads) reads its row and
	 * opens its descriptors ahead, so that its first hit waits for neither.
	 * May be NULL. */
	void (*warm)(struct jc_daemon *d, const uint8_t key[16]);
};

/* Adds n to counter c of the daemon's cache (counters.h: marks it dirty). */
static inline void jc__daemon_count(struct jc_daemon *d, enum jc_counter c, uint64_t n)
{
	jc__count(&d->cache->counters, c, n);
}

/* Answers conn's request with res (objfd >= 0 passed with it, always closed),
 * through d->conn_ops; the connection may then read its next request. */
static inline void jc__answer(struct jc_daemon *d, struct jc_conn *conn, const struct jc_res *res,
			      int objfd)
{
	d->request.conn_ops->send_result(conn, res, objfd);
	d->request.conn_ops->done(conn);
}

/* Answers conn's request with an error (message borrowed). */
static inline void jc__refuse(struct jc_daemon *d, struct jc_conn *conn, int code,
			      const char *message)
{
	d->request.conn_ops->send_error(conn, code, message);
	d->request.conn_ops->done(conn);
}

/* Limits of one include scan: entries recorded, bytes of one header. */
#define JC_INC_MAX_ENTRIES   200000
#define JC_INC_MAX_FILE_SIZE (64u << 20)

/* What the include scan, checks and learning need (borrowed from d). */
static inline struct jc_inc_ctx jc__daemon_inc_ctx(struct jc_daemon *d)
{
	return (struct jc_inc_ctx){
	    .memo = d->request.inc_memo,
	    .toolkit_root = __atomic_load_n(&d->tc, __ATOMIC_ACQUIRE)->toolkit_include,
	    .max_entries = JC_INC_MAX_ENTRIES,
	    .max_file_size = JC_INC_MAX_FILE_SIZE,
	};
}

/* keyed.c: the request path once the key is known. */
/* Serves a hit from e, an ok row m's jc__memcache_lookup returned, on m's
 * thread: a descriptor of its object (opened ahead, else now; checked
 * either way) answers conn's request, whose name expressions are names;
 * t0: when the request was decoded. 0, or the open's error when the object
 * is missing or fails its checks (nothing answered). */
int jc__keyed_serve_hit(struct jc_memcache *m, struct jc_conn *conn, const struct jc_entry *e,
			const struct jc_strv *names, uint64_t t0);
/* Loop thread: answers conn's request *req with key from the index (a hit,
 * a negative hit; a client's reject handled first), else joins key's flight
 * or starts one. Takes *req and inc (an include set of direct key direct;
 * both NULL when the request reads nothing from disk); tc: the toolchain
 * the key was made with; fetched (or NULL): the remote tier's value of key,
 * fetched already (jc__flight_start). */
void jc__keyed_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req,
		       const uint8_t key[16], const uint8_t *direct, struct jc_inc_set *inc,
		       uint64_t t0, const struct jc_toolchain *tc, struct jc_fetched *fetched);

/* cache.c: the front of the request path: validating and keying. */
/* Memory cache, include memo and manifests, watches. 0 or a JC_E* code (logged). */
int jc__cache_init(struct jc_daemon *d);
/* Frees what jc__cache_init made; after the loop has stopped. */
void jc__cache_free(struct jc_daemon *d);
/* A serving thread (m its memory cache): answers conn's request *req when
 * it is a plain hit (validated, keyed on this thread, the row in m or m's
 * SQLite reader, its object opened) and returns 1 (*req cleared); returns
 * 0, *req untouched, for everything else (a miss, a negative entry, a
 * refusal, a client-read tree, a rejected object, a key not remembered),
 * which the main loop's jc__cache_request then handles from the start. */
int jc__cache_try_hit(struct jc_memcache *m, struct jc_conn *conn, struct jc_req *req);
/* Main loop: handles a decoded COMPILE request of conn; takes ownership of *req. The
 * request is validated, then keyed: one that reads files from disk
 * (jc__inc_needed) in the thread pool (manifest check or include scan);
 * every other one at once. */
void jc__cache_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req);

/* cache_watch.c: the request path's include tree watches (watch.h). */
struct jc_watch_stats;
/* Loop thread: moves the watcher's event counts into the counters and,
 * when out is not NULL, fills *out with its figures; new makes d->request.watch
 * (jc__cache_init; without inotify or with --max-include-watches 0 there is
 * none, and every hit stat-walks: logged); start polls its descriptor on
 * d->loop, draining it as events come (so that the queue does not overflow
 * between requests); stop closes that poll handle (at shutdown). */
void jc__cache_watch_counts(struct jc_daemon *d, struct jc_watch_stats *out);
void jc__cache_watch_new(struct jc_daemon *d);
void jc__cache_watch_start(struct jc_daemon *d);
void jc__cache_watch_stop(struct jc_daemon *d);
/* Why a tree was not watched (enum jc_watch_refusal, watch.h), for the log;
 * static text. Any thread. */
const char *jc__cache_watch_refusal(int why);

/* keymemo.c: full keys of requests that read from disk, by lookup key
 * (see there); any thread (it locks itself). new: 0 or JC_ENOMEM; free:
 * NULL-safe. */
int jc__keymemo_new(struct jc_daemon *d);
void jc__keymemo_free(struct jc_daemon *d);
/* Copies the remembered key of direct to key and returns 1, or returns 0;
 * *watched set when it is valid because its include tree is watched and
 * unchanged (watch.h). */
int jc__keymemo_get(struct jc_daemon *d, const uint8_t direct[16], uint8_t key[16], int *watched);
/* Remembers key for direct when set has nothing on disk to re-check, or
 * its tree is watched (stamp, then owned by the memo; 0 = none). */
void jc__keymemo_put(struct jc_daemon *d, const uint8_t direct[16], const uint8_t key[16],
		     const struct jc_inc_set *set, uint64_t stamp);
/* Forgets what is remembered for direct. */
void jc__keymemo_forget(struct jc_daemon *d, const uint8_t direct[16]);

/* memcache.c: rows of hot keys, access-time batching, the periodic flush.
 * One instance per thread that serves hits (see there): d->request.mc, the main
 * loop's, and one per serving thread (server.c). Every function on an
 * instance is for its own thread, but for those that say otherwise. */
struct jc_memcache;
/* A new instance reading rows through rix (owned when owns_rix: closed by
 * free); share: how many instances split the descriptor cap and
 * --hot-copy-budget.
 * The first made is d->request.mc (the caller stores it); the others are linked
 * to it (made on the main loop, before their threads start). 0 or JC_ENOMEM. */
int jc__memcache_new(struct jc_daemon *d, struct jc_index *rix, int owns_rix, unsigned share,
		     struct jc_memcache **out);
/* NULL-safe; after its thread stopped. d->request.mc's frees every instance. */
void jc__memcache_free(struct jc_memcache *m);
/* The daemon m serves. */
struct jc_daemon *jc__memcache_daemon(const struct jc_memcache *m);
/* The row of key: the memory cache first, then the instance's reader
 * (cached then); NULL when there is none (an index error is logged).
 * Borrowed until the next call on the instance. */
const struct jc_entry *jc__memcache_lookup(struct jc_memcache *m, const uint8_t key[16]);
/* What a hit of e (a row jc__memcache_lookup returned, not negative) is
 * served from. The slot's checked copy of an object under 64 KiB: *bytes
 * (e->size of them, borrowed until the next call on the instance) and -1
 * returned. Else a descriptor opened ahead by jc__memcache_refill, each its
 * own open file description, checked at open as jc_tier_ops.open_object
 * checks, and again now (jc_tier_ops.object_is: the file at the object's
 * name is still that one and passes the open's checks; one opened from a
 * sealed memfd copy needs no check), owned by the caller; or -1 with *bytes
 * NULL when neither is held: then the caller opens the object itself, and
 * the slot is queued for a refill from the row's second hit on. */
int jc__memcache_take(struct jc_memcache *m, const struct jc_entry *e, const uint8_t **bytes);
/* Makes the copies (--hot-copy-budget) and opens ahead the descriptors of
 * the slots hits took from since the last call (after the answers went
 * out: server_conn.c calls it from the busy poll). */
void jc__memcache_refill(struct jc_memcache *m);
/* Reads key's row into the memory cache and makes ready what its hits are
 * served from (jc__memcache_refill: its copy, else descriptors opened
 * ahead), now (a compile's answers are out: its first hit then waits for
 * neither). */
void jc__memcache_warm(struct jc_memcache *m, const uint8_t key[16]);
/* 1 when the instance holds key's row. */
int jc__memcache_holds(struct jc_memcache *m, const uint8_t key[16]);
/* Forgets key's row; on d->request.mc, every other instance forgets it too
 * before its next lookup. */
void jc__memcache_forget(struct jc_memcache *m, const uint8_t key[16]);
/* A serving thread's instance, before a lookup: forgets what d->request.mc forgot
 * since the last call (one atomic load when nothing was). */
void jc__memcache_sync(struct jc_memcache *m);
/* Forgets every row, in every instance (entries were removed). Main loop. */
void jc__cache_memcache_drop_all(struct jc_daemon *d);
/* Records that uid was served key (hits: 1 for a hit, 0 for a negative hit
 * or a joined compile) for the next flush: one pending row per key and uid. */
void jc__memcache_touch(struct jc_memcache *m, const uint8_t key[16], uid_t uid, uint32_t hits);
/* Adds n to counter c and, when hit_ns is not 0, a hit's server-side time
 * to the instance's pending figures (jc__memcache_collect moves them). */
void jc__memcache_count(struct jc_memcache *m, enum jc_counter c, uint64_t n, uint64_t hit_ns);
/* Main loop: moves every instance's pending counts and hit times into the
 * daemon's counters and d->run.hit_latency (the flush and stats call it). */
void jc__memcache_collect(struct jc_daemon *d);
/* Whether a request reads from disk (jc__inc_needed), by direct key: the
 * instance's memo slot for direct. */
struct jc_needed_memo *jc__memcache_needed_memo(struct jc_memcache *m, const uint8_t direct[16]);
/* Starts a flush of access times and counters in the thread pool, unless
 * one runs (each tick). */
void jc__cache_tick(struct jc_daemon *d);
/* Writes what is pending now, on this thread (at a clean stop). */
void jc__cache_flush_sync(struct jc_daemon *d);
/* Access times and hit counts not yet written, and a counter snapshot. */
struct jc_flush_job;
/* Loop thread: a job for what is pending (NULL when nothing is): the
 * counters, taken now; the touches, taken when it is written. Commands that
 * walk entries by access time take one when queued and write it first. */
struct jc_flush_job *jc__cache_flush_take(struct jc_daemon *d);
/* Any thread: writes j, with every touch pending then, under wlock (failures
 * are logged) and frees it. NULL-safe. */
void jc__cache_flush_write(struct jc_daemon *d, struct jc_flush_job *j);

/* flight.c: single flight and publishing. */
/* The flight of key, or NULL. */
struct jc_flight *jc__flight_find(struct jc_daemon *d, const uint8_t key[16]);
/* Adds conn as a waiter (a reference is taken); names (NULL for the
 * flight's own request, whose order the result has) is moved into the
 * waiter. 0 or JC_ENOMEM. */
int jc__flight_join(struct jc_flight *f, struct jc_conn *conn, uint32_t cache, uint64_t t0,
		    struct jc_strv *names);
/* A value of the remote tier fetched before its flight began (cache.c: the
 * key a dependency record leads to, fetched while the record was checked):
 * res verified for that key, ns what fetching it took. */
struct jc_fetched {
	struct jc_res res;
	uint64_t ns;
};

/* Starts a flight for key with conn as its first waiter; takes *req and
 * *inc (set to NULL) on success. bad_object (or NULL) names the object of
 * the row it replaces, which failed its checks; direct is the direct key of
 * *inc (NULL without one). The request's bytes count against
 * --buffer-budget until the flight ends: JC_EBUSY (nothing taken) when they
 * would pass it while compiles are queued; JC_ENOMEM. A local miss asks the
 * remote tier first, then the worker pool; fetched (or NULL), the tier's
 * value of key already, is served instead of asking (its res moved out).
 * tc: the toolchain key was made with (one of d's, kept until exit): the
 * result is stored with its identity, and only when the worker that made it
 * loaded that compiler. free_key: for a name-free request (req.h), its key
 * without the name (key is then its named key, jc__key_named), which the
 * remote tier is asked first and the result is stored under when it holds
 * no name (progname.h); else NULL. A fatbin request's flight asks no one:
 * the caller builds it (jc__fatbin_start) or, when that fails, discards it
 * (jc__flight_free). *out: the flight, on success; only a fatbin request's
 * may be used after the call: any other may have been answered and freed
 * already (a client gone when the pool took it, a remote hit, a stop). */
int jc__flight_start(struct jc_daemon *d, struct jc_conn *conn, const struct jc_toolchain *tc,
		     const uint8_t key[16], const uint8_t *direct, struct jc_req *req,
		     struct jc_inc_set **inc, uint64_t t0, const uint8_t *bad_object,
		     struct jc_fetched *fetched, const uint8_t *free_key, struct jc_flight **out);
/* Frees f, unlinked from d->request.flights: the waiters left are dropped
 * unanswered, its request bytes released (the end of every flight; cache.c:
 * a fatbin flight whose build could not start). */
void jc__flight_free(struct jc_flight *f);
/* Queues f for the worker pool (loop thread). */
void jc__cache_enqueue(struct jc_daemon *d, struct jc_flight *f);
/* The end of f's compile (f->res holds the result or the failure): counted,
 * logged, published when publishable, answered. */
void jc__flight_done(struct jc_daemon *d, struct jc_flight *f);
/* Ends f as failed: its result becomes status, the request's output and
 * message (borrowed), then jc__flight_done. */
void jc__flight_fail(struct jc_daemon *d, struct jc_flight *f, int status, const char *message);

/* flight_check.c: a flight's result checked before it is published, in
 * the thread pool (flight.c's publish job; f is that job's alone then).
 * rehashed: reads set again when one of its files changed within the
 * settle margin (jc__inc_rehash): 1 when the bytes are those hashed
 * (f->rehashed set), 0 when not (what names the file), < 0 a JC_E* code
 * (what says so). check_deps: does the key cover what NVRTC read (f->res's
 * deps)? If not, the set that does is learnt (f->learned, f->store_key, the
 * manifest, f->record for the remote tier) or the result is served, not
 * stored (f->deps_mismatch or f->tree_missing, f->errmsg). name_verdict: a
 * name-free request's result goes under its key without the name, else
 * under a named key (f->store_key, f->name_bound; progname.h). */
int jc__flight_rehashed(struct jc_flight *f, const struct jc_inc_set *set, char *what, size_t len);
void jc__flight_check_deps(struct jc_flight *f);
void jc__flight_name_verdict(struct jc_flight *f);

/* fatbin.c: multi-architecture requests (fatbin.h). */
struct jc_fatbin;
/* Builds the fatbin of flight f (its req has fatbin output; keyed.c calls
 * it once jc__flight_start has made f): asks the request path
 * (d->request.hooks.request) for each target's part as conn's uid would, then
 * assembles. Ends, like a worker job, in jc__flight_done. Returns 0,
 * f->fatbin and f->fatbin_ops set, or JC_ENOMEM (nothing started: the
 * caller frees f). */
int jc__fatbin_start(struct jc_daemon *d, struct jc_flight *f, struct jc_conn *conn);
/* 1 when conn is the internal connection of one of fb's parts. */
int jc__fatbin_part_conn(const struct jc_fatbin *fb, const struct jc_conn *conn);

/* rewarm.c: compiles kept requests (core/kept.h) again for this daemon's
 * toolchain identity, in the background: at most cfg.rewarm_workers at a
 * time on the pool's idle workers, most valuable first, within
 * cfg.rewarm_budget_s CPU seconds. Loop thread. */
struct jc_admin_reply;
/* new: 0 or JC_ENOMEM; free: after the loop stopped, NULL-safe. */
int jc__rewarm_new(struct jc_daemon *d);
/* At shutdown: queues nothing more, closes its handle. */
void jc__rewarm_close(struct jc_daemon *d);
void jc__rewarm_free(struct jc_daemon *d);
/* Queues the kept requests of entries of another identity (top most
 * valuable, 0 all; used since since_s unix seconds, 0 any), read from the
 * index in the thread pool; why goes to the log. Then done(ctx, queued or
 * a JC_E* code < 0). A re-warm already running takes no new one (done
 * with 0); but the daemon's own ask (done NULL: its toolchain changed)
 * starts another of every entry once that one ends, since what it chose
 * was for the identity before. */
void jc__rewarm_start(struct jc_daemon *d, uint64_t top, int64_t since_s, const char *why,
		      void (*done)(void *ctx, int64_t queued), void *ctx);
/* The state of the re-warm as the admin command "warm" answers it: a
 * record (state, counts, CPU time, identities), then one per failed
 * request (key, source_name, message, log). 0 or JC_ENOMEM. */
int jc__rewarm_report(const struct jc_daemon *d, struct jc_admin_reply *out);

/* server.c (its functions: server.h) */
/* How many serving threads cfg asks for. */
static inline unsigned jc__server_threads(const struct jc_config *cfg)
{
	return cfg->serve_threads > 0 ? (unsigned)cfg->serve_threads : 1;
}

#endif
