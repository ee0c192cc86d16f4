/* SPDX-License-Identifier: MIT */
/*
 * The request path once a request's key is known (daemon.h, "keyed.c"; the
 * front, validating and keying, is cache.c): a hit or a negative hit from
 * the memory cache or the index, a client's reject of an object it was
 * served, else joining the key's flight or starting one (flight.c; a
 * fatbin's, fatbin.c). Loop thread, but for jc__keyed_serve_hit, which every
 * thread that serves hits calls with its own memory cache.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "core/progname.h"
#include "daemon/daemon.h"
#include "daemon/retry.h"
#include "jitcache/jitcache.h"

/* Builds a result view of an index row (borrows its strings). */
static void result_of_entry(const struct jc_entry *e, struct jc_res *res, uint32_t cache)
{
	jc__res_init(res);
	res->status = e->status ? (e->error ? e->error : JC_ECOMPILE) : 0;
	res->cache = cache;
	memcpy(res->key, e->key, 16);
	memcpy(res->object, e->object, 16);
	res->output = e->output;
	res->size = e->status ? 0 : e->size;
	res->log = e->log;
	res->lowered = e->lowered;
	res->n_lowered = e->n_lowered;
	res->compile_ns = e->compile_ns;
	if (e->status)
		res->message = (char *)"compile failed (cached negative entry): see the log";
}

/* Serves a hit from an ok row; returns 0, or an error when the object is
 * missing or fails its checks (it is then quarantined and the row dropped).
 *
 * A hot object under 64 KiB is served inline, from the memory cache's copy
 * of its bytes (read and hash-checked once, memcache.c); the client hashes
 * them again. Any other hit is served a descriptor of its own, opened for
 * it alone (jc__store_open_object: openat without following links, then
 * owner, type, mode and size checked with fstat on the very descriptor that
 * is sent, so the file served is the file checked; or opened from the
 * memory cache's sealed memfd copy of a large object): opened ahead, after
 * an earlier hit of the row was answered (jc__memcache_take, which checks it
 * again), else now. Each client thus gets its own read-only open file
 * description: what one does to it (fcntl O_DIRECT or O_APPEND, lseek)
 * cannot change what the daemon or another client reads. The client hashes
 * every byte it is served from a file, so content changed in place is
 * caught there (and rejected: see handle_reject); a sealed copy's bytes the
 * daemon checked after sealing. jitcache-bench measures the reopen against
 * a dup. */
int jc__keyed_serve_hit(struct jc_memcache *m, struct jc_conn *conn, const struct jc_entry *e,
			const struct jc_strv *names, uint64_t t0)
{
	struct jc_daemon *d = jc__memcache_daemon(m);
	const uint8_t *bytes;
	int fd = jc__memcache_take(m, e, &bytes);
	int rc = fd >= 0 || bytes ? 0 : d->cache->ops->open_object(d->cache, e, &fd);
	if (rc != 0)
		return rc;
	struct jc_res res;
	struct jc_lowered *tmp;
	result_of_entry(e, &res, JC_CACHE_HIT);
	res.data = (uint8_t *)bytes; /* borrowed: the answer is encoded before we return */
	jc__res_lowered_in_order(&res, names, &tmp);
	res.server_ns = jc__now_ns() - t0;
	jc__memcache_count(m, JC_CTR_hits, 1, res.server_ns ? res.server_ns : 1);
	jc__memcache_touch(m, e->key, d->request.conn_ops->uid(conn), 1);
	jc__answer(d, conn, &res, fd);
	free(tmp);
	return 0;
}

/* Quarantines a bad object and forgets the cached row. The index row is
 * left to the flight that follows (publish_work_cb): it replaces the row, or
 * deletes it if it still names object, in the thread pool. */
static void drop_bad_entry(struct jc_daemon *d, const uint8_t key[16], const uint8_t object[16],
			   const char *why)
{
	char hex[33], ohex[33];
	jc__hex16(key, hex);
	jc__hex16(object, ohex);
	jc_log_warn(STORE, "key %s: object %s %s; quarantined, recompiling (driver %s)", hex, ohex,
		    why, d->tc->driver_version);
	d->cache->ops->quarantine(d->cache, object);
	jc__memcache_forget(d->request.mc, key);
}

/* A client could not use the object it was served: quarantine it (if the
 * row still names it) so that this request compiles afresh. Returns 1 and
 * copies the object to bad when it did. A load failure does so at most
 * JC_LOAD_RETRY_MAX times per key and window (retry.h); past that it
 * returns 0 and the existing entry is served. */
static int handle_reject(struct jc_daemon *d, struct jc_conn *conn, const uint8_t key[16],
			 const struct jc_req *req, uint8_t bad[16])
{
	const struct jc_entry *e = jc__memcache_lookup(d->request.mc, key);
	if (!e || e->status != 0 || memcmp(e->object, req->reject_object, 16) != 0)
		return 0; /* already replaced: the next lookup serves the new object */
	int corrupt = req->reject_reason == JC_REJECT_CORRUPT;
	if (corrupt && d->cache->ops->verify(d->cache, e) == 0) {
		/* A client's word alone never quarantines a good object. */
		char hex[33];
		jc__hex16(key, hex);
		jc_log_warn(STORE,
			    "key %s: pid %d reported a bad object, but it passes the full hash "
			    "check; kept",
			    hex, (int)d->request.conn_ops->pid(conn));
		return 0;
	}
	jc__daemon_count(d, corrupt ? JC_CTR_corrupt_objects : JC_CTR_load_failures, 1);
	const char *why = corrupt ? "failed the client's hash check"
				  : (req->reject_message ? req->reject_message : "did not load");
	if (!corrupt &&
	    !jc__retry_take(d->request.load_retries, key, (int64_t)(jc__now_ns() / 1000000000u))) {
		char hex[33];
		jc__hex16(key, hex);
		jc_log_warn(STORE,
			    "key %s: a client could not load it again (%s); %d recompiles in "
			    "%d s already, serving the existing entry (driver %s)",
			    hex, why, JC_LOAD_RETRY_MAX, JC_LOAD_RETRY_WINDOW_S,
			    d->tc->driver_version);
		return 0;
	}
	memcpy(bad, e->object, 16);
	drop_bad_entry(d, key, bad, why);
	return 1;
}

/*
 * Answers from the index row of key, if there is one that serves: returns 1
 * when answered, 0 when the request must compile. A row from the memory
 * cache may be stale (purged or evicted meanwhile, its object with it), so
 * an object that cannot be opened is checked against SQLite's row before it
 * is called corrupt. A corrupt object is counted and quarantined, *bad set
 * to 1 and its hash copied to bad_object.
 */
static int serve_cached(struct jc_daemon *d, struct jc_conn *conn, const uint8_t key[16],
			const struct jc_strv *names, uint64_t t0, int *bad, uint8_t bad_object[16])
{
	int in_memory = jc__memcache_holds(d->request.mc, key);
	const struct jc_entry *e = jc__memcache_lookup(d->request.mc, key);
	if (!e)
		return 0;
	if (e->status) {
		if (e->expires <= jc__wall_s())
			return 0;
		struct jc_res res;
		result_of_entry(e, &res, JC_CACHE_NEGATIVE_HIT);
		res.server_ns = jc__now_ns() - t0;
		jc__daemon_count(d, JC_CTR_negative_hits, 1);
		/* its log is now this uid's to see too */
		jc__memcache_touch(d->request.mc, key, d->request.conn_ops->uid(conn), 0);
		jc__answer(d, conn, &res, -1);
		return 1;
	}
	uint8_t object[16];
	memcpy(object, e->object, 16);
	int rc = jc__keyed_serve_hit(d->request.mc, conn, e, names, t0);
	if (rc == 0)
		return 1;
	if (rc != JC_ECORRUPT && rc != JC_ENOTFOUND)
		return 0;
	if (in_memory) {
		jc__memcache_forget(d->request.mc, key);
		return serve_cached(d, conn, key, names, t0, bad, bad_object);
	}
	if (rc == JC_ENOTFOUND && !d->cache->ops->row_names(d->cache, key, object)) {
		/* Purged or evicted between our read of the row and the open (rows
		 * go before their objects): a plain miss, nothing is corrupt. */
		jc__memcache_forget(d->request.mc, key);
		return 0;
	}
	jc__daemon_count(d, JC_CTR_corrupt_objects, 1);
	drop_bad_entry(d, key, object, rc == JC_ECORRUPT ? "failed its checks" : "is missing");
	*bad = 1;
	memcpy(bad_object, object, 16);
	return 0;
}

/* A client waits on background flight f: it and, for a fatbin, its parts'
 * flights become client work (jc__pool_promote). */
static void promote(struct jc_daemon *d, struct jc_flight *f)
{
	/* the pool may drop (free) a flight whose clients are gone as it
	 * dispatches, f too unless it builds a fatbin (flight_wanted) */
	const struct jc_fatbin *fb = f->fatbin;
	f->background = 0;
	jc__pool_promote(d->pool, &f->job);
	if (!fb)
		return;
	for (struct jc_flight *g = d->request.flights; g; g = g->next) {
		if (!g->background)
			continue;
		for (const struct jc_waiter *w = g->waiters; w; w = w->next)
			if (jc__fatbin_part_conn(fb, w->conn)) {
				promote(d, g);
				break;
			}
	}
}

/* jc__flight_start (its arguments) and, for a fatbin request, the build of
 * its flight from its parts (fatbin.c), which it asks for through the
 * request path (d->request.hooks.request). 0 or jc__flight_start's error; JC_ENOMEM when the build
 * cannot start (the flight is freed: it has taken req and inc). */
static int start_flight(struct jc_daemon *d, struct jc_conn *conn, const struct jc_toolchain *tc,
			const uint8_t key[16], const uint8_t *direct, struct jc_req *req,
			struct jc_inc_set **inc, uint64_t t0, const uint8_t *bad_object,
			struct jc_fetched *fetched, const uint8_t *free_key)
{
	struct jc_flight *f;
	int fatbin = req->output == JC_OUTPUT_FATBIN; /* any other f may be freed on return */
	int rc = jc__flight_start(d, conn, tc, key, direct, req, inc, t0, bad_object, fetched,
				  free_key, &f);
	if (rc == 0 && fatbin && jc__fatbin_start(d, f, conn) != 0) {
		jc__flight_free(f);
		return JC_ENOMEM;
	}
	return rc;
}

/* The request path once the key is known (loop thread). Takes *req and inc
 * (whose direct key is direct; both NULL when nothing is read from disk);
 * tc: the toolchain the key was made with (d->tc then). */
void jc__keyed_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req,
		       const uint8_t key[16], const uint8_t *direct, struct jc_inc_set *inc,
		       uint64_t t0, const struct jc_toolchain *tc, struct jc_fetched *fetched)
{
	uint8_t bad_object[16], named[16], base[16];
	int bad = 0, rc, keys = 0;
	/* A name-free request (req.h): its key holds no name; a result that
	 * holds its name's last component or the whole name is stored under
	 * that one's named key (progname.h); the flight has the whole name's
	 * (a flight's waiters all get its bytes). */
	const uint8_t *flight_key = key;
	if (req->name_free) {
		if ((keys = jc__progname_keys(key, req->source_name, base, named)) < 0) {
			jc__refuse(d, conn, JC_ENOMEM, "out of memory");
			goto out;
		}
		flight_key = named;
	}
	/* A flight for the key replaces whatever object a client rejects. */
	struct jc_flight *f = jc__flight_find(d, flight_key);
	if (f) {
		if (jc__flight_join(f, conn, JC_CACHE_JOINED, t0, &req->name_exprs) == 0) {
			jc__daemon_count(d, JC_CTR_single_flight_joins, 1);
			/* A client waits on a re-warm's compile: it goes first now. */
			if (f->background &&
			    !(d->request.hooks.background && d->request.hooks.background(d, conn)))
				promote(d, f);
			goto out;
		}
		jc__refuse(d, conn, JC_ENOMEM, "out of memory");
		goto out;
	}
	if (req->reject_reason != JC_REJECT_NONE)
		bad = handle_reject(d, conn, key, req, bad_object);
	if (!bad && (serve_cached(d, conn, key, &req->name_exprs, t0, &bad, bad_object) ||
		     (keys == 2 && !bad &&
		      serve_cached(d, conn, base, &req->name_exprs, t0, &bad, bad_object)) ||
		     (keys && !bad &&
		      serve_cached(d, conn, named, &req->name_exprs, t0, &bad, bad_object)))) {
		jc__daemon_count(d, JC_CTR_tree_digest_hits, req->tree_round == JC_TREE_DIGEST);
		goto out;
	}
	if (d->run.stopping) {
		jc__refuse(d, conn, JC_EBUSY, "daemon is shutting down");
	} else if (req->tree_round == JC_TREE_LOOKUP || req->tree_round == JC_TREE_DIGEST) {
		/* A client-read tree by hashes found nothing: the client sends the
		 * bytes on this connection (a RESULT: an ERROR would close it). */
		struct jc_res miss;
		jc__res_init(&miss);
		miss.status = JC_ENOTFOUND;
		miss.cache = JC_CACHE_MISS;
		miss.message = "no entry for these headers: send their bytes";
		memcpy(miss.key, key, 16);
		jc__answer(d, conn, &miss, -1);
	} else if ((rc = start_flight(d, conn, tc, flight_key, inc ? direct : NULL, req, &inc, t0,
				      bad ? bad_object : NULL, fetched, keys ? key : NULL)) != 0) {
		char msg[200] = "out of memory";
		if (rc == JC_EBUSY) {
			snprintf(
			    msg, sizeof(msg),
			    "the daemon's request buffers are full (%zu of %zu "
			    "bytes, --buffer-budget, held by queued compiles); try again later",
			    jc__budget_used(&d->request.buffers), d->request.buffers.max);
			jc_log_warn(NET, "uid %d pid %d: compile refused: buffer budget full",
				    (int)d->request.conn_ops->uid(conn),
				    (int)d->request.conn_ops->pid(conn));
			jc__daemon_count(d, JC_CTR_busy_refusals, 1);
		}
		jc__refuse(d, conn, rc, msg);
	}
out:
	jc__req_clear(req);
	jc__inc_set_free(inc);
}
