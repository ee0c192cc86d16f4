/* SPDX-License-Identifier: MIT */
/*
 * The front of the request path: validate → key, then keyed.c: memory cache
 * → index → object; misses join or start a single flight (flight.c). The
 * hit path of the serving threads, jc__cache_try_hit. A request that reads headers
 * from disk is keyed in the thread pool first: its direct key names an
 * include manifest whose variants are re-checked, else the headers are
 * scanned (includes.h, manifest.h); every other request is keyed on the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/util.h"
#include "common/watch.h"
#include "core/key.h"
#include "core/progname.h"
#include "daemon/daemon.h"
#include "daemon/remote.h"
#include "daemon/retry.h"
#include "jitcache/jitcache.h"

/* Files whose hashes the daemon remembers (all are dropped when full). */
#define INC_MEMO_ENTRIES 65536

static int entry_known(struct jc_daemon *d, const uint8_t key[16])
{
	if (jc__flight_find(d, key))
		return 1;
	const struct jc_entry *e = jc__memcache_lookup(d->request.mc, key);
	return e && (!e->status || e->expires > jc__wall_s());
}

/* 1 when req's key has a usable entry or a flight (for a name-free request,
 * it or its named keys): a key from a watched tree is then served without
 * its include set (none is needed). */
static int key_known(struct jc_daemon *d, const struct jc_req *req, const uint8_t key[16])
{
	uint8_t named[16], base[16];
	int keys = req->name_free ? jc__progname_keys(key, req->source_name, base, named) : 0;
	return entry_known(d, key) || (keys == 2 && entry_known(d, base)) ||
	       (keys > 0 && entry_known(d, named));
}

/* A request keyed in the thread pool because it reads headers from disk. */
struct key_job {
	uv_work_t work; /* the scan's job (key_work_cb) */
	struct jc_daemon *d;
	struct jc_conn *conn; /* referenced */
	struct jc_req req;    /* owned */
	uint64_t t0;
	const struct jc_toolchain *tc; /* the direct key's (d->tc then) */
	uint8_t direct[16];	       /* computed on the loop */
	uint8_t lookup[16];	       /* its manifests' and memo's key (key.h) */
	uint8_t key[16];
	struct jc_inc_set *inc; /* owned; NULL after a failure */
	int rc;
	int from_manifest;
	uint64_t stamp;	   /* watch stamp of the include tree (watch.h); 0 = none */
	int watch_refused; /* enum jc_watch_refusal other than OK and OFF */
	uint64_t n_stat, ns;
	char err[512];
	/*
	 * The remote tier's dependency record of the lookup key (remote.h),
	 * for a request this daemon has no manifest for: asked for when the
	 * job is queued, so that its round trip overlaps the pool hand-off and
	 * the scan, and opened and checked in a job of its own as soon as it
	 * comes (rec_work: record_check), beside the scan. Whichever of the two
	 * jobs ends last stores the scan's set as a manifest variant, unless
	 * the record matched; a matched record's set is stored after the
	 * request is answered (manifest_later). rec_lock guards rec_pending,
	 * pool_scanned and what each job leaves for the other to read.
	 */
	uv_work_t rec_work;
	pthread_mutex_t rec_lock;
	int rec_pending;	     /* asked for, not yet checked (or come empty) */
	int pool_scanned;	     /* key_work_cb has ended */
	struct jc_remote_blob *blob; /* owned: the record, from record_cb on */
	int rec_asked;		     /* loop: a record was asked for */
	int rec_waiting;	     /* loop: asked for, not yet come */
	int scanned;		     /* loop: key_work_cb has ended */
	int unstored;		     /* the scan's set is not yet a manifest variant */
	int in_pool;		     /* loop: the record's job is queued */
	/* The value a record's hint names (jc__remote_prefetch), fetched while
	 * the record is checked; served when the checked record keys the
	 * request with that very key (key_done). */
	int val_state; /* enum val_state */
	int val_rc;
	int asking; /* value_ask is on the stack */
	uint8_t val_key[16];
	struct jc_fetched val;	   /* val.res owned */
	struct jc_inc_set *record; /* owned: the record's set, checked (record_rc 1) */
	uint8_t record_key[16];	   /* its key */
	int record_rc;		   /* 1 matched, -1 refused (why), 0 not used */
	uint64_t rec_n_stat;	   /* record_check's stat calls */
	char why[256];
	/* jc__now_ns() at each phase of a request that asked for a record
	 * (logged at info by key_done; jitcache-bench reads it): the pool took
	 * the job, the scan ended, the record was asked for, it came, its
	 * check began and ended. */
	uint64_t t_work, t_scanned, t_rec_sent, t_rec_got, t_check, t_checked;
};

enum val_state {
	VAL_NONE,  /* not asked for */
	VAL_ASKED, /* asked, no answer yet */
	VAL_CAME,  /* answered (val_rc) */
};

/* Thread pool, once a set is known to match: watch its tree (watch.h,
 * jc__watch_checked). */
static void key_watch(struct key_job *j, const struct jc_inc_ctx *ctx)
{
	int why, disk = 0;
	for (size_t i = 0; i < j->inc->n; i++)
		disk |= j->inc->v[i].kind != JC_INC_TOOLKIT;
	if (!disk || !j->d->request.watch)
		return;
	uint64_t before = j->inc->n_stat;
	j->stamp = jc__watch_checked(j->d->request.watch, j->inc, ctx, &why);
	j->n_stat += j->inc->n_stat - before;
	if (!j->stamp)
		j->watch_refused = why != JC_WATCH_OFF ? why : 0;
}

/* Thread pool: set stored as a manifest variant of lookup (a failure costs
 * the next request a scan). */
static void store_variant(struct jc_daemon *d, const uint8_t lookup[16],
			  const struct jc_inc_set *set)
{
	char err[256];
	if (jc__manifest_add(d->request.manifests, lookup, set, err, sizeof(err)) != 0)
		jc_log_warn(KEY, "include manifest not stored (the next request scans again): %s",
			    err);
}

/* Thread pool, at the end of the scan's job and of the record's: the one
 * that ends last (as rec_lock orders them) stores the scan's set, when the
 * scan made one that no manifest holds yet and the record, if one was
 * asked for, did not match. */
static void store_scan_if_last(struct key_job *j, int scan_ended)
{
	pthread_mutex_lock(&j->rec_lock);
	if (scan_ended)
		j->pool_scanned = 1;
	else
		j->rec_pending = 0;
	int last = j->pool_scanned && !j->rec_pending && j->record_rc <= 0;
	pthread_mutex_unlock(&j->rec_lock);
	if (last && j->rc == 0 && j->unstored) {
		store_variant(j->d, j->lookup, j->inc);
		j->unstored = 0;
	}
}

/* Thread pool: the fetched record (j->blob, if any) opened, admitted (it
 * names only what the request declares: jc__inc_record_admit) and checked
 * against this machine's files (jc__inc_check); when it matches, it is
 * j->record with its key (record_rc 1; key_done decides whether it keys
 * the request and stores it as a manifest variant after the answer), and
 * the blob is kept for that; else the blob is freed. Runs beside the scan:
 * it reads only what the loop set before queueing either job. */
static void record_check(struct key_job *j, const struct jc_inc_ctx *ctx)
{
	struct jc_inc_set *set = j->blob ? calloc(1, sizeof(*set)) : NULL;
	uint8_t tree[16];
	char path[200];
	j->t_check = jc__now_ns();
	int rc = set ? jc__remote_record_open(j->blob, j->lookup, ctx->max_entries, set, j->why,
					      sizeof(j->why))
		     : JC_ENOMEM; /* or no record */
	rc = rc ?: jc__inc_record_admit(set, &j->req, ctx, path, sizeof(path));
	if (rc == JC_ECORRUPT) {
		j->record_rc = -1; /* j->why says why */
	} else if (rc == 0) {
		snprintf(j->why, sizeof(j->why), "names %s, which the request does not declare",
			 path);
		j->record_rc = -1;
	} else if (rc == 1 && jc__inc_check(set, ctx) == 1 &&
		   jc__inc_key_digest(set, &j->req.include_dirs, tree) == 0 &&
		   jc__key_with_tree(j->direct, tree, j->record_key) == 0) {
		j->rec_n_stat = set->n_stat;
		j->record = set;
		set = NULL;
		j->record_rc = 1;
	}
	if (set) {
		j->rec_n_stat = set->n_stat;
		jc__inc_set_free(set);
	}
	if (j->record_rc != 1) {
		jc__remote_blob_free(j->blob);
		j->blob = NULL;
	}
	j->t_checked = jc__now_ns();
}

/* Thread pool: a manifest variant of the direct key that matches, or a scan. */
static void key_work_cb(uv_work_t *w)
{
	struct key_job *j = w->data;
	struct jc_daemon *d = j->d;
	uint64_t t = j->t_work = jc__now_ns();
	const uint8_t *direct = j->direct;
	const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(d);
	int rc = 0;
	if (!(j->inc = calloc(1, sizeof(*j->inc))))
		rc = JC_ENOMEM;
	/* Where the directories really lead: before any manifest (one made
	 * before this check existed) or scan. */
	if (rc == 0)
		rc = jc__inc_dirs_check(&j->req.include_dirs, 1, j->err, sizeof(j->err));
	if (rc == 0)
		rc = jc__manifest_lookup(d->request.manifests, j->lookup, &ctx, j->inc, &j->n_stat);
	if (rc == 1) {
		j->from_manifest = 1;
		rc = 0;
	} else if (rc == 0) {
		rc = jc__inc_scan(&j->req, &ctx, j->inc, j->err, sizeof(j->err));
		j->n_stat += j->inc->n_stat;
		j->unstored = rc == 0;
	}
	/* A fresh scan may yet be replaced by the fleet's dependency record
	 * (key_next): its tree is watched from the next request on, which
	 * the manifest keys. */
	if (rc == 0 && (j->from_manifest || !d->remote))
		key_watch(j, &ctx);
	uint8_t tree[16];
	j->rc = rc ?: jc__inc_key_digest(j->inc, &j->req.include_dirs, tree);
	j->rc = j->rc ?: jc__key_with_tree(direct, tree, j->key);
	if (j->rc == JC_ENOMEM && !j->err[0])
		snprintf(j->err, sizeof(j->err),
			 "out of memory keying a request with include files");
	j->t_scanned = jc__now_ns();
	j->ns = j->t_scanned - t;
	store_scan_if_last(j, 1);
}

static double ms_between(uint64_t a, uint64_t b)
{
	return a && b >= a ? (double)(b - a) / 1e6 : 0;
}

/* The phases of a request that fetched a dependency record (key_job). */
static void log_record_phases(const struct key_job *j, const char *hex)
{
	jc_log_info(KEY,
		    "key %s: keyed in %.3f ms: pool wait %.3f, scan %.3f, record fetch %.3f, "
		    "record check %.3f (pool wait %.3f)%s",
		    hex, ms_between(j->t0, jc__now_ns()), ms_between(j->t0, j->t_work),
		    ms_between(j->t_work, j->t_scanned), ms_between(j->t_rec_sent, j->t_rec_got),
		    ms_between(j->t_check, j->t_checked), ms_between(j->t_rec_got, j->t_check),
		    j->record_rc > 0 ? "" : "; record not used");
}

/* The record's outcome (record_check), on the loop: a refusal reported; a
 * match keys the request when it gives another key than the scan's, unless
 * that one has an entry meanwhile. */
static void record_apply(struct key_job *j)
{
	struct jc_daemon *d = j->d;
	if (j->record_rc < 0 && d->remote)
		jc__remote_record_rejected(d->remote, j->lookup, j->why);
	if (j->record_rc > 0 && j->rc == 0 && !j->from_manifest &&
	    memcmp(j->record_key, j->key, 16) != 0 && !key_known(d, &j->req, j->key)) {
		jc__inc_set_free(j->inc);
		j->inc = j->record;
		j->record = NULL;
		memcpy(j->key, j->record_key, 16);
		jc__daemon_count(d, JC_CTR_remote_deps_used, 1);
	} else if (j->record_rc > 0) {
		j->record_rc = 0;
	}
	j->n_stat += j->rec_n_stat;
	if (j->record)
		jc__inc_set_free(j->record);
	j->record = NULL;
}

/* A matched record's set, stored as a manifest variant of its lookup key
 * once the request it keyed is answered: opened again from its blob (the
 * request path took the checked set), in the thread pool. */
struct manifest_later {
	uv_work_t work;
	struct jc_daemon *d;
	uint8_t lookup[16];
	struct jc_remote_blob *blob; /* owned */
};

static void manifest_later_work_cb(uv_work_t *w)
{
	struct manifest_later *m = w->data;
	struct jc_inc_set set;
	char why[256];
	if (jc__remote_record_open(m->blob, m->lookup, JC_INC_MAX_ENTRIES, &set, why,
				   sizeof(why)) == 0)
		store_variant(m->d, m->lookup, &set);
	jc__inc_set_clear(&set);
}

static void manifest_later_after_cb(uv_work_t *w, int status)
{
	struct manifest_later *m = w->data;
	(void)status;
	jc__remote_blob_free(m->blob);
	free(m);
}

/* Loop: queues the store of j's matched record (takes j->blob). The scan's
 * set stays unstored: the record's, which checked out here, is the
 * variant (the same one when both give one key). */
static void manifest_later(struct key_job *j)
{
	struct manifest_later *m = calloc(1, sizeof(*m));
	if (m) {
		m->d = j->d;
		memcpy(m->lookup, j->lookup, 16);
		m->blob = j->blob;
		m->work.data = m;
		if (uv_queue_work(j->d->loop, &m->work, manifest_later_work_cb,
				  manifest_later_after_cb) == 0) {
			j->blob = NULL;
			return;
		}
		free(m);
	}
	jc_log_warn(KEY,
		    "include manifest not stored (the next request scans again): out of memory");
}

/* Takes a keyed (or failed) job to the request path and frees it (loop). */
static void key_done(struct key_job *j)
{
	struct jc_daemon *d = j->d;
	record_apply(j);
	jc__daemon_count(d, JC_CTR_include_stats, j->n_stat);
	if (j->rc == 0) {
		char hex[33];
		jc__hex16(j->key, hex);
		jc__daemon_count(
		    d, j->from_manifest ? JC_CTR_include_manifest_hits : JC_CTR_include_scans, 1);
		if (j->from_manifest)
			jc__daemon_count(d, JC_CTR_include_tree_stat_walks, 1);
		if (j->watch_refused) {
			jc__daemon_count(d, JC_CTR_include_watch_fallbacks, 1);
			jc_log_info(
			    KEY,
			    "include tree of %zu entries not watched (%s): stat walk per request",
			    j->inc->n, jc__cache_watch_refusal(j->watch_refused));
		}
		jc_log_info(KEY,
			    "key %s: %zu include entries %s%s: %llu stat calls, %llu files read, "
			    "%.3f ms",
			    hex, j->inc->n,
			    j->record_rc > 0   ? "from the remote tier's dependency record"
			    : j->from_manifest ? "from the manifest"
					       : "scanned",
			    j->inc->fallback ? " (computed include: whole directories)" : "",
			    (unsigned long long)j->n_stat, (unsigned long long)j->inc->n_read,
			    (double)j->ns / 1e6);
		if (j->t_rec_sent)
			log_record_phases(j, hex);
		jc__keymemo_put(d, j->lookup, j->key, j->inc, j->stamp);
		j->stamp = 0;
		/* The value the record's hint named, verified as the value of
		 * that key, if the request is keyed with it (by the checked
		 * record, or by its scan). */
		int use = j->val_state == VAL_CAME && j->val_rc == 0 &&
			  memcmp(j->val_key, j->key, 16) == 0;
		jc__keyed_request(d, j->conn, &j->req, j->key, j->direct, j->inc, j->t0, j->tc,
				  use ? &j->val : NULL);
		j->inc = NULL;
		/* A record that matched here: a manifest variant, written now that
		 * the answer is out (a request in between is keyed as this one). */
		if (j->blob && !j->from_manifest)
			manifest_later(j);
	} else {
		if (j->rc == JC_EINVAL)
			jc__daemon_count(d, JC_CTR_bad_requests, 1);
		jc__refuse(d, j->conn, j->rc, j->err[0] ? j->err : jc_strerror(j->rc));
		jc__req_clear(&j->req);
		jc__inc_set_free(j->inc);
	}
	jc__watch_forget(d->request.watch, j->stamp);
	d->request.conn_ops->unref(j->conn);
	jc__res_clear(&j->val.res);
	jc__remote_blob_free(j->blob);
	pthread_mutex_destroy(&j->rec_lock);
	free(j);
}

static void record_work_cb(uv_work_t *w)
{
	struct key_job *j = w->data;
	const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(j->d);
	record_check(j, &ctx);
	store_scan_if_last(j, 0);
}

static void key_step(struct key_job *j);

static void record_after_cb(uv_work_t *w, int status)
{
	struct key_job *j = w->data;
	(void)status;
	j->in_pool = 0;
	key_step(j);
}

static void record_cb(void *arg, int rc, struct jc_remote_blob *blob);

/* Loop: asks for j's record. When the tier cannot be asked, the record
 * counts as come empty (record_cb). j may be gone on return. */
static void record_fetch(struct key_job *j)
{
	pthread_mutex_lock(&j->rec_lock);
	j->rec_pending = 1;
	pthread_mutex_unlock(&j->rec_lock);
	j->rec_asked = j->rec_waiting = 1;
	j->t_rec_sent = jc__now_ns();
	int rc = jc__remote_record_fetch(j->d->remote, j->lookup, record_cb, j);
	if (rc != 0) {
		j->t_rec_sent = 0;
		record_cb(j, rc, NULL);
	}
}

/*
 * Loop, once the scan and any record asked for are in. A request scanned
 * (no manifest variant matched here) whose key has no entry may be one a
 * daemon elsewhere learnt that NVRTC reads more for than the scan predicts
 * (a probe next to the source), and stored under the learnt key; its
 * dependency record names that key. Only on this path is the record
 * fetched: a request keyed from a manifest, and every hit, costs no round
 * trip (one with no manifest at all asked for it already: key_job). The
 * job ends (key_done) once a value asked for early has answered too.
 */
static void key_next(struct key_job *j)
{
	struct jc_daemon *d = j->d;
	int want = j->rc == 0 && !j->from_manifest && d->remote && !d->run.stopping &&
		   !key_known(d, &j->req, j->key);
	if (want && !j->rec_asked) {
		record_fetch(j);
		return;
	}
	if (j->val_state != VAL_ASKED) /* else value_cb goes on */
		key_done(j);
}

/* Loop: the job goes on when nothing it waits for is outstanding. */
static void key_step(struct key_job *j)
{
	if (j->scanned && !j->rec_waiting && !j->in_pool)
		key_next(j);
}

/* The value of the record's hint (loop). */
static void value_cb(void *arg, int rc, struct jc_res *res)
{
	struct key_job *j = arg;
	j->val_rc = rc;
	if (rc == 0) {
		j->val.res = *res;
		jc__res_init(res);
		j->val.ns = jc__now_ns() - j->val.ns;
	}
	j->val_state = VAL_CAME;
	if (!j->asking)
		key_step(j);
}

/* A record came (blob, still the caller's alone): the value its hint names
 * is asked for at once, so that its round trip and checks overlap the
 * record's check (loop). */
static void value_ask(struct key_job *j, const struct jc_remote_blob *blob)
{
	struct jc_daemon *d = j->d;
	if (!blob || !d->remote || d->run.stopping || !jc__remote_blob_hint(blob, j->val_key))
		return;
	j->val_state = VAL_ASKED;
	j->val.ns = jc__now_ns();
	j->asking = 1;
	if (jc__remote_prefetch(d->remote, j->val_key, value_cb, j) != 0)
		j->val_state = VAL_NONE;
	j->asking = 0;
}

/* The remote tier's dependency record of the request's lookup key (loop):
 * checked in a job of its own at once, beside the scan if that still runs
 * (a record the request no longer wants is not opened; the job then only
 * stores the scan's set, if it is the last). */
static void record_cb(void *arg, int rc, struct jc_remote_blob *blob)
{
	struct key_job *j = arg;
	struct jc_daemon *d = j->d;
	j->t_rec_got = jc__now_ns();
	j->rec_waiting = 0;
	if (rc != 0)
		blob = NULL;
	if (blob && j->scanned &&
	    (j->rc != 0 || j->from_manifest || d->run.stopping || key_known(d, &j->req, j->key))) {
		jc__remote_blob_free(blob);
		blob = NULL;
	}
	value_ask(j, blob);
	j->blob = blob;
	j->rec_work.data = j;
	j->in_pool = 1;
	jc__loop_spin(d->request.spin);
	if (uv_queue_work(d->loop, &j->rec_work, record_work_cb, record_after_cb) != 0) {
		j->in_pool = 0;
		jc__remote_blob_free(j->blob);
		j->blob = NULL;
		pthread_mutex_lock(&j->rec_lock);
		j->rec_pending = 0; /* the scan's set may stay unstored: a scan next time */
		pthread_mutex_unlock(&j->rec_lock);
	}
	key_step(j);
}

static void key_after_cb(uv_work_t *w, int status)
{
	struct key_job *j = w->data;
	(void)status;
	j->scanned = 1;
	key_step(j);
}

/* The key of a request whose client read its include tree (req->tree_round):
 * its direct key with the tree's key digest, the client's word for a
 * JC_TREE_DIGEST round (as its hashes would be), else computed from the
 * entries it sent, whose set fills inc (zeroed; the caller clears it). 0 or
 * an error, with its message in err when it has one. Any thread. */
static int tree_key(const struct jc_req *req, const uint8_t direct[16], struct jc_inc_set *inc,
		    uint8_t key[16], char *err, size_t errlen)
{
	uint8_t tree[16];
	int rc = 0;
	if (req->tree_round == JC_TREE_DIGEST)
		memcpy(tree, req->tree_digest, 16);
	else
		rc = jc__inc_tree_set(req, inc, err, errlen)
			 ?: jc__inc_key_digest(inc, &req->include_dirs, tree);
	return rc ?: jc__key_with_tree(direct, tree, key);
}

/* The request path of a client-read tree the serving thread did not
 * answer: keyed here, on the loop. */
static void tree_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req,
			 const uint8_t direct[16], uint64_t t0)
{
	char err[600] = "";
	uint8_t key[16];
	struct jc_inc_set *inc = calloc(1, sizeof(*inc));
	int rc = inc ? tree_key(req, direct, inc, key, err, sizeof(err)) : JC_ENOMEM;
	if (rc != 0) {
		jc__daemon_count(d, JC_CTR_bad_requests, rc == JC_EINVAL);
		jc__refuse(d, conn, rc, err[0] ? err : jc_strerror(rc));
		jc__req_clear(req);
		jc__inc_set_free(inc);
		return;
	}
	jc__daemon_count(d, JC_CTR_tree_requests, 1);
	jc__keyed_request(d, conn, req, key, direct, inc, t0, d->tc, NULL);
}

/*
 * jc__inc_needed(req), remembered by the request's direct key (which covers
 * everything it looks at: texts, names, options, include directories), so
 * that a hit of a source with directives does not lex it again.
 */
static int reads_disk(struct jc_memcache *mc, const struct jc_req *req, const uint8_t direct[16])
{
	struct jc_needed_memo *m = jc__memcache_needed_memo(mc, direct);
	if (m->used && memcmp(m->direct, direct, 16) == 0)
		return m->needed;
	memcpy(m->direct, direct, 16);
	m->needed = jc__inc_needed(req);
	m->used = 1;
	return m->needed;
}

/* A job just queued for a request that has no manifest here (a fresh
 * daemon, a new source): its record is asked for now, beside the scan. */
static void record_ask(struct key_job *j)
{
	struct jc_daemon *d = j->d;
	if (d->remote && !jc__manifest_exists(d->request.manifests, j->lookup))
		record_fetch(j);
}

/* The front of the request path, on any thread that serves (m its memory
 * cache): validated once (request.h), keyed into key (the direct key when
 * headers are read from disk: *needed set), then admitted by this daemon.
 * 0 or the refusal's code, with its message in err. The toolchain is
 * read once (a switch replaces d->tc on the loop: main.c). */
static int key_request(struct jc_memcache *m, struct jc_conn *conn, struct jc_req *req,
		       uint8_t key[16], int *needed, char *err, size_t errlen)
{
	struct jc_daemon *d = jc__memcache_daemon(m);
	int rc = jc__req_validate(req, err, errlen);
	rc = rc
		 ?: jc__key_of_valid(req, __atomic_load_n(&d->tc, __ATOMIC_ACQUIRE), key, err,
				     errlen);
	*needed = rc == 0 && reads_disk(m, req, key);
	return rc
		   ?: jc__req_admit(&d->request.policy, req, *needed,
				    d->request.conn_ops->uid(conn), err, errlen);
}

int jc__cache_try_hit(struct jc_memcache *m, struct jc_conn *conn, struct jc_req *req)
{
	struct jc_daemon *d = jc__memcache_daemon(m);
	uint64_t t0 = jc__now_ns();
	uint8_t key[16], lookup[16];
	char err[1536];
	int needed, watched = 0;
	/* A tree round that carries the headers' bytes is a miss as a rule. */
	if (req->tree_round == JC_TREE_BYTES || req->reject_reason != JC_REJECT_NONE ||
	    key_request(m, conn, req, key, &needed, err, sizeof(err)) != 0)
		return 0;
	if (req->tree_round) {
		struct jc_inc_set inc = {0};
		uint8_t direct[16];
		memcpy(direct, key, 16);
		int rc = tree_key(req, direct, &inc, key, err, sizeof(err));
		jc__inc_set_clear(&inc);
		if (rc != 0)
			return 0; /* the loop refuses it, with its reason */
	} else if (needed && (jc__key_lookup(key, &req->include_dirs, lookup) != 0 ||
			      !jc__keymemo_get(d, lookup, key, &watched))) {
		return 0;
	}
	jc__memcache_sync(m);
	const struct jc_entry *e = jc__memcache_lookup(m, key);
	if (!e || e->status || jc__keyed_serve_hit(m, conn, e, &req->name_exprs, t0) != 0)
		return 0;
	if (req->tree_round) {
		jc__memcache_count(m, JC_CTR_tree_requests, 1, 0);
		jc__memcache_count(m, JC_CTR_tree_digest_hits, req->tree_round == JC_TREE_DIGEST,
				   0);
	} else if (needed) {
		jc__memcache_count(
		    m, watched ? JC_CTR_include_tree_watch_hits : JC_CTR_include_manifest_hits, 1,
		    0);
	}
	jc__req_clear(req);
	return 1;
}

void jc__cache_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req)
{
	uint64_t t0 = jc__now_ns();
	uint8_t key[16];     /* the key, or the direct key when headers are read from disk */
	char err[1536] = ""; /* room for the supported-architecture list */
	int needed;
	int rc = key_request(d->request.mc, conn, req, key, &needed, err, sizeof(err));
	if (rc != 0) {
		jc__daemon_count(
		    d, rc == JC_EVERSION ? JC_CTR_nvrtc_other_builds : JC_CTR_bad_requests, 1);
		jc__refuse(d, conn, rc, err[0] ? err : jc_strerror(rc));
		jc__req_clear(req);
		return;
	}
	if (req->tree_round) {
		tree_request(d, conn, req, key, t0);
		return;
	}
	uint8_t lookup[16];
	if (needed && jc__key_lookup(key, &req->include_dirs, lookup) != 0) {
		jc__refuse(d, conn, JC_ENOMEM, "out of memory");
		jc__req_clear(req);
		return;
	}
	int watched = 0;
	uint8_t memo_key[16];
	int known = !needed || jc__keymemo_get(d, lookup, memo_key, &watched);
	if (known && watched && !key_known(d, req, memo_key)) {
		/* Evicted or never stored: a compile needs the include set. */
		jc__keymemo_forget(d, lookup);
		known = 0;
	}
	if (known) {
		if (needed) {
			jc__daemon_count(d,
					 watched ? JC_CTR_include_tree_watch_hits
						 : JC_CTR_include_manifest_hits,
					 1);
			memcpy(key, memo_key, 16);
		}
		jc__keyed_request(d, conn, req, key, NULL, NULL, t0, d->tc, NULL);
		return;
	}
	struct key_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->d = d;
		j->conn = conn;
		j->req = *req;
		j->t0 = t0;
		j->tc = d->tc;
		memcpy(j->direct, key, 16);
		memcpy(j->lookup, lookup, 16);
		j->work.data = j;
		pthread_mutex_init(&j->rec_lock, NULL);
		jc__res_init(&j->val.res);
		d->request.conn_ops->ref(conn);
		memset(req, 0, sizeof(*req));
		if (uv_queue_work(d->loop, &j->work, key_work_cb, key_after_cb) == 0) {
			jc__loop_spin(d->request.spin); /* the answer comes from the pool */
			record_ask(j);
			return;
		}
		*req = j->req;
		d->request.conn_ops->unref(conn);
		pthread_mutex_destroy(&j->rec_lock);
		free(j);
	}
	jc__refuse(d, conn, JC_ENOMEM, "out of memory");
	jc__req_clear(req);
}

int jc__cache_init(struct jc_daemon *d)
{
	char err[512] = "";
	d->request.hooks.request = jc__cache_request;
	d->request.policy.tc = d->tc;
	d->request.policy.test_faults = d->cfg.test_faults;
	d->request.policy.self = geteuid(); /* (main.c: after become_user) */
	pthread_mutex_init(&d->request.policy.builds_lock, NULL);
	if (jc__memcache_new(d, jc__cachedir_reader(d->cache), 0, 1 + jc__server_threads(&d->cfg),
			     &d->request.mc) != 0 ||
	    jc__keymemo_new(d) != 0 ||
	    jc__inc_memo_new(INC_MEMO_ENTRIES, &d->request.inc_memo) != 0 ||
	    jc__retry_new(&d->request.load_retries) != 0)
		return JC_ENOMEM;
	int rc =
	    jc__manifests_open(d->cfg.cache_dir, 0700, &d->request.manifests, err, sizeof(err));
	if (rc != 0) {
		jc_log_err(STORE, "%s", err);
		return rc;
	}
	jc__cache_watch_new(d);
	return 0;
}

void jc__cache_free(struct jc_daemon *d)
{
	jc__memcache_free(d->request.mc);
	d->request.mc = NULL;
	jc__keymemo_free(d);
	jc__inc_memo_free(d->request.inc_memo);
	d->request.inc_memo = NULL;
	jc__manifests_close(d->request.manifests);
	d->request.manifests = NULL;
	jc__watch_free(d->request.watch);
	d->request.watch = NULL;
	jc__retry_free(d->request.load_retries);
	d->request.load_retries = NULL;
}
