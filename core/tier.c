/* SPDX-License-Identifier: MIT */
/*
 * Opening a cache directory, and the local tier: the store + index behind
 * struct jc_tier_ops, with the rules between a row and its object (tier.h).
 */
#include "core/tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/index.h"
#include "core/store.h"
#include "jitcache/jitcache.h"

/* The local tier's own state (tier.h): nothing outside this file sees it. */
struct jc_local {
	struct jc_store *store; /* NULL with INSPECT */
	struct jc_index *wix;	/* the writer (read-only with INSPECT) */
	struct jc_index *rix;	/* the loop's reader; NULL without READER */
};

/* --- the local tier ----------------------------------------------------- */

static int local_lookup(struct jc_cachedir *c, const uint8_t key[16], struct jc_entry *out)
{
	int rc = jc__index_get(c->local->rix ? c->local->rix : c->local->wix, key, out);
	if (rc != 0)
		jc__entry_clear(out);
	return rc;
}

static int local_open_object(struct jc_cachedir *c, const struct jc_entry *e, int *fd)
{
	return jc__store_open_object(c->local->store, e->object, e->size, fd);
}

static int local_object_is(struct jc_cachedir *c, const struct jc_entry *e, const struct stat *st)
{
	return jc__store_object_is(c->local->store, e->object, e->size, st);
}

static int local_verify(struct jc_cachedir *c, const struct jc_entry *e)
{
	int fd = -1;
	int rc = jc__store_open_object(c->local->store, e->object, e->size, &fd);
	if (rc == 0) {
		rc = jc__store_verify_fd(fd, e->object, e->size);
		close(fd);
	}
	return rc;
}

static int local_read_object(struct jc_cachedir *c, const struct jc_entry *e, uint8_t **data)
{
	size_t size;
	return jc__store_read_object(c->local->store, e->object, e->size, data, &size);
}

static int local_row_names(struct jc_cachedir *c, const uint8_t key[16], const uint8_t object[16])
{
	struct jc_entry e = {0};
	int still = local_lookup(c, key, &e) == 0 && e.status == JC_ENTRY_OK &&
		    memcmp(e.object, object, 16) == 0;
	jc__entry_clear(&e);
	return still;
}

static int local_publish(struct jc_cachedir *c, struct jc_entry *e, uint32_t uid, const void *data,
			 size_t size, char *err, size_t errlen)
{
	int ok = e->status == JC_ENTRY_OK, fd = -1, rc = 0;
	/* A full disk: no write is tried until space returns. */
	if (jc__store_disk_full(c->local->store, NULL))
		return jc__fail(err, errlen, JC_ENOSPC,
				"disk full (%s): nothing is stored until space "
				"returns",
				strerror(ENOSPC));
	/* The object first, outside the lock (its fsyncs are the slow part). */
	if (ok)
		rc = jc__store_put(c->local->store, data, size, e->object, err, errlen);
	pthread_mutex_lock(&c->wlock);
	/* The put may have kept an existing object (same content) that a purge,
	 * eviction or gc, all under wlock, removed since: store it again, so the
	 * row never names a missing object. */
	if (ok && rc == 0 &&
	    jc__store_open_object(c->local->store, e->object, size, &fd) == JC_ENOTFOUND)
		rc = jc__store_put(c->local->store, data, size, e->object, err, errlen);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (rc = jc__index_put_user(c->local->wix, e, uid)) != 0)
		snprintf(err, errlen, "index: %s", jc__index_errmsg(c->local->wix));
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

static int local_quarantine(struct jc_cachedir *c, const uint8_t object[16])
{
	return jc__store_quarantine(c->local->store, object);
}

static int local_drop_row(struct jc_cachedir *c, const uint8_t key[16], const uint8_t object[16])
{
	struct jc_entry e = {0};
	int rc = 0;
	pthread_mutex_lock(&c->wlock);
	if (jc__index_get(c->local->wix, key, &e) == 0 && e.status == JC_ENTRY_OK &&
	    memcmp(e.object, object, 16) == 0 && (rc = jc__index_delete(c->local->wix, key)) != 0)
		jc_log_warn(INDEX, "row of a bad object not deleted: %s",
			    jc__index_errmsg(c->local->wix));
	pthread_mutex_unlock(&c->wlock);
	jc__entry_clear(&e);
	return rc;
}

/* The row, then its object if no other row names it. */
static int remove_once(struct jc_cachedir *c, const struct jc_entry *e)
{
	int rc = jc__index_delete(c->local->wix, e->key);
	if (rc == JC_ENOTFOUND)
		return 0;
	if (rc != 0 || e->status)
		return rc;
	uint64_t refs = 0;
	rc = jc__index_object_refs(c->local->wix, e->object, &refs);
	if (rc == 0 && refs == 0) {
		rc = jc__store_remove(c->local->store, e->object);
		if (rc == JC_ENOTFOUND)
			rc = 0;
	}
	return rc;
}

static int local_remove(struct jc_cachedir *c, const struct jc_entry *e)
{
	int rc = remove_once(c, e);
	/* A full disk: deleting a row needs room in the write-ahead log. The
	 * reserve gives it; each object removed after its row gives more (the
	 * caller makes the reserve again when it is done: jc__store_reserve_make). */
	if (rc == JC_ENOSPC && jc__store_reserve_release(c->local->store))
		rc = remove_once(c, e);
	return rc;
}

static int local_unlink_ahead(struct jc_cachedir *c, const struct jc_entry *e)
{
	uint64_t refs = 0;
	return e->status == JC_ENTRY_OK &&
	       jc__index_object_refs(c->local->wix, e->object, &refs) == 0 && refs == 1 &&
	       jc__store_remove(c->local->store, e->object) == 0;
}

static int local_remove_bad(struct jc_cachedir *c, const struct jc_entry *e)
{
	/* The row first, as for any removal: no row names a missing object. */
	int rc = jc__index_delete(c->local->wix, e->key);
	jc__store_quarantine(c->local->store, e->object);
	return rc;
}

static int local_foreach(struct jc_cachedir *c, const struct jc_filter *f,
			 int (*cb)(const struct jc_entry *e, void *ctx), void *ctx)
{
	return jc__index_foreach(c->local->wix, f, cb, ctx);
}

static int local_foreach_request(struct jc_cachedir *c, const struct jc_kept_filter *f,
				 int (*cb)(const struct jc_kept *k, void *ctx), void *ctx)
{
	return jc__index_foreach_request(c->local->wix, f, cb, ctx);
}

struct collect_ctx {
	struct jc_cachedir *c;
	int64_t now;
	int (*cb)(const char *path, uint64_t size, void *ctx);
	void *ctx;
};

static int collect_cb(const uint8_t *hash, const char *path, const struct stat *st, void *ctx)
{
	struct collect_ctx *g = ctx;
	if ((int64_t)st->st_mtime > g->now - JC_GC_GRACE_S)
		return 0;
	if (hash) {
		uint64_t refs = 0;
		int rc = jc__index_object_refs(g->c->local->wix, hash, &refs);
		if (rc != 0)
			return rc;
		if (refs)
			return 0;
	}
	if (unlink(path) != 0)
		return 0;
	return g->cb(path, (uint64_t)st->st_size, g->ctx);
}

static int local_collect(struct jc_cachedir *c, int64_t now,
			 int (*cb)(const char *path, uint64_t size, void *ctx), void *ctx)
{
	struct collect_ctx g = {.c = c, .now = now, .cb = cb, .ctx = ctx};
	return jc__store_foreach(c->local->store, collect_cb, &g);
}

static int local_health(struct jc_cachedir *c, struct jc_tier_health *out)
{
	struct jc_index *ix = c->local->wix;
	memset(out, 0, sizeof(*out));
	int rc = jc__index_totals(ix, &out->entries, &out->negative_entries, &out->bytes);
	rc = rc ?: jc__index_stored(ix, &out->stored);
	return rc ?: jc__index_request_totals(ix, &out->requests, &out->request_bytes);
}

static int local_lookup_for(struct jc_cachedir *c, const uint8_t key[16], int64_t uid,
			    struct jc_entry *out)
{
	jc__entry_clear(out);
	int rc = uid < 0 ? jc__index_get(c->local->wix, key, out)
			 : jc__index_get_user(c->local->wix, key, (uint32_t)uid, out);
	if (rc != 0)
		jc__entry_clear(out);
	return rc;
}

static int local_find_keys(struct jc_cachedir *c, const char *hex, int64_t uid, uint8_t (*keys)[16],
			   size_t *n)
{
	return jc__index_keys_with_prefix(c->local->wix, hex, uid, keys, n);
}

static int local_users_of(struct jc_cachedir *c, const uint8_t key[16], uint32_t *uids, uint64_t *n)
{
	return jc__index_users_of(c->local->wix, key, uids, n);
}

static int local_user_usage(struct jc_cachedir *c, uint32_t uid, struct jc_user_totals *t)
{
	return jc__index_user_totals(c->local->wix, uid, t);
}

static int local_foreach_user(struct jc_cachedir *c,
			      int (*cb)(const struct jc_user_totals *t, void *ctx), void *ctx)
{
	return jc__index_foreach_user_totals(c->local->wix, cb, ctx);
}

static int local_touch(struct jc_cachedir *c, const uint8_t (*keys)[16], const uint32_t *hits,
		       const uint32_t *uids, size_t n, int64_t now)
{
	return jc__index_touch(c->local->wix, keys, hits, uids, n, now);
}

/* uid's use, then e when no use is left. */
static int remove_use_once(struct jc_cachedir *c, const struct jc_entry *e, uint32_t uid, int *gone)
{
	uint64_t left = 0;
	int rc = jc__index_unuse(c->local->wix, e->key, uid, &left);
	*gone = rc == 0 && left == 0;
	return rc || left ? rc : local_remove(c, e);
}

static int local_remove_use(struct jc_cachedir *c, const struct jc_entry *e, uint32_t uid,
			    int *gone)
{
	int rc = remove_use_once(c, e, uid, gone);
	/* A full disk: as local_remove. */
	if (rc == JC_ENOSPC && jc__store_reserve_release(c->local->store))
		rc = remove_use_once(c, e, uid, gone);
	return rc;
}

static void local_reclaim(struct jc_cachedir *c, int pages)
{
	if (pages && jc__index_reclaim(c->local->wix) != 0)
		jc_log_warn(INDEX, "freed pages not reclaimed: %s",
			    jc__index_errmsg(c->local->wix));
	jc__store_reserve_make(c->local->store);
}

static int local_put_rows(struct jc_cachedir *c, const struct jc_entry *e, size_t n, int64_t uid)
{
	if (uid < 0)
		return jc__index_put_many(c->local->wix, e, n);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = jc__index_put_user(c->local->wix, &e[i], (uint32_t)uid);
	return rc;
}

static int local_count_versions(struct jc_cachedir *c, const char *versions, uint64_t *n)
{
	return jc__index_count_versions(c->local->wix, versions, n);
}

static int local_keep_request(struct jc_cachedir *c, const uint8_t key[16], uint32_t hash,
			      uint32_t uid, const void *data, size_t len)
{
	return jc__index_keep_request(c->local->wix, key, hash, uid, data, len);
}

static int local_request_data(struct jc_cachedir *c, int64_t id, uint8_t **data, size_t *len)
{
	return jc__index_request_data(c->local->wix, id, data, len);
}

static int local_request_of(struct jc_cachedir *c, const uint8_t key[16], struct jc_kept *out)
{
	return jc__index_get_request(c->local->wix, key, out);
}

static int local_overhead(struct jc_cachedir *c, uint64_t *bytes)
{
	return jc__store_overhead(c->local->store, bytes);
}

static int local_disk_full(struct jc_cachedir *c, uint64_t *free_bytes)
{
	return jc__store_disk_full(c->local->store, free_bytes);
}

const struct jc_tier_ops jc__local_tier = {
    .name = "local",
    .lookup = local_lookup,
    .open_object = local_open_object,
    .object_is = local_object_is,
    .verify = local_verify,
    .read_object = local_read_object,
    .row_names = local_row_names,
    .publish = local_publish,
    .quarantine = local_quarantine,
    .drop_row = local_drop_row,
    .remove = local_remove,
    .unlink_ahead = local_unlink_ahead,
    .remove_bad = local_remove_bad,
    .foreach = local_foreach,
    .foreach_request = local_foreach_request,
    .collect = local_collect,
    .health = local_health,
    .lookup_for = local_lookup_for,
    .find_keys = local_find_keys,
    .users_of = local_users_of,
    .user_usage = local_user_usage,
    .foreach_user = local_foreach_user,
    .touch = local_touch,
    .remove_use = local_remove_use,
    .reclaim = local_reclaim,
    .put_rows = local_put_rows,
    .count_versions = local_count_versions,
    .keep_request = local_keep_request,
    .request_data = local_request_data,
    .request_of = local_request_of,
    .overhead = local_overhead,
    .disk_full = local_disk_full,
};

/* --- opening a cache directory ------------------------------------------ */

/* A stored counter: one of jc__counter_names, or the recorded budget
 * (unknown names are ignored). */
static int load_counter(const char *name, uint64_t value, void *ctx)
{
	struct jc_cachedir *c = ctx;
	if (strcmp(name, JC_STORED_MAX_SIZE) == 0)
		c->max_size = value;
	else if (strcmp(name, JC_STORED_USER_MAX_SIZE) == 0)
		c->user_max_size = value;
	for (int i = 0; i < JC_CTR__COUNT; i++)
		if (strcmp(name, jc__counter_names[i]) == 0)
			c->counters.v[i] = value;
	return 0;
}

int jc__cachedir_open_reader(struct jc_cachedir *c, struct jc_index **out, char *err, size_t errlen)
{
	char path[4200];
	if (snprintf(path, sizeof(path), "%s/index.sqlite", c->dir) >= (int)sizeof(path))
		return jc__fail(err, errlen, JC_EINVAL, "cache directory path too long: %s",
				c->dir);
	return jc__index_open(path, 1, out, err, errlen);
}

struct jc_index *jc__cachedir_reader(struct jc_cachedir *c)
{
	return c->local->rix;
}

int jc__reader_get(struct jc_index *r, const uint8_t key[16], struct jc_entry *out, char *err,
		   size_t errlen)
{
	int rc = jc__index_get(r, key, out);
	if (rc != 0) {
		jc__entry_clear(out);
		if (errlen)
			snprintf(err, errlen, "%s", jc__index_errmsg(r));
	}
	return rc;
}

void jc__reader_close(struct jc_index *r)
{
	jc__index_close(r);
}

const char *jc__cachedir_errmsg(struct jc_cachedir *c)
{
	return jc__index_errmsg(c->local->wix);
}

int jc__cachedir_check_local(const char *dir, char *err, size_t errlen)
{
	return jc__store_check_local(dir, err, errlen);
}

int jc__cachedir_tmp_check(struct jc_cachedir *c)
{
	return jc__store_tmp_check(c->local->store);
}

int jc__cachedir_identity(struct jc_cachedir *c, char *out, size_t cap)
{
	return jc__index_meta_get(c->local->wix, JC_META_IDENTITY, out, cap);
}

int jc__cachedir_set_identity(struct jc_cachedir *c, const char *identity)
{
	return jc__index_meta_set(c->local->wix, JC_META_IDENTITY, identity);
}

void jc__cachedir_record_budget(struct jc_cachedir *c, uint64_t max_size, uint64_t user_max_size)
{
	static const char *const names[] = {JC_STORED_MAX_SIZE, JC_STORED_USER_MAX_SIZE};
	const uint64_t values[] = {max_size, user_max_size};
	if (jc__index_counters_save(c->local->wix, names, values, 2) != 0)
		jc_log_warn(INDEX, "budget not recorded: %s", jc__index_errmsg(c->local->wix));
	jc__cachedir_apply_budget(c, max_size);
}

int jc__cachedir_open(const char *dir, unsigned flags, int wait_ms, struct jc_cachedir **out,
		      char *err, size_t errlen)
{
	const int inspect = (flags & JC_CACHEDIR_INSPECT) != 0;
	char path[4200];
	struct stat st;
	struct jc_cachedir *c = calloc(1, sizeof(*c));
	if (c)
		c->local = calloc(1, sizeof(*c->local));
	if (!c || !c->local || !(c->dir = strdup(dir))) {
		if (c)
			free(c->local);
		free(c);
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	c->ops = &jc__local_tier;
	c->lock_fd = -1;
	jc__parse_size(JC_DEFAULT_MAX_SIZE, &c->max_size);
	pthread_mutex_init(&c->wlock, NULL);
	int rc = 0;
	if (snprintf(path, sizeof(path), "%s/index.sqlite", dir) >= (int)sizeof(path)) {
		rc = jc__fail(err, errlen, JC_EINVAL, "cache directory path too long: %s", dir);
		goto err_out;
	}
	if (!inspect) {
		/* Lock before opening (the lock makes the directory): opening the
		 * store empties its staging area. */
		rc = jc__store_lock(dir, wait_ms, err, errlen);
		if (rc < 0)
			goto err_out;
		c->lock_fd = rc;
		rc = jc__store_open(dir, &c->local->store, err, errlen);
		if (rc != 0)
			goto err_out;
	}
	if (stat(dir, &st) != 0) {
		rc = jc__fail(err, errlen, JC_EIO, "cannot stat %s: %s", dir, strerror(errno));
		goto err_out;
	}
	c->dev = (uint64_t)st.st_dev;
	c->ino = (uint64_t)st.st_ino;
	rc = jc__index_open(path, inspect, &c->local->wix, err, errlen);
	if (rc == 0 && !inspect && (flags & JC_CACHEDIR_READER))
		rc = jc__index_open(path, 1, &c->local->rix, err, errlen);
	if (rc != 0)
		goto err_out;
	rc = jc__index_counters_load(c->local->wix, load_counter, c);
	if (rc != 0) {
		snprintf(err, errlen, "index %s: counters: %s", path,
			 jc__index_errmsg(c->local->wix));
		goto err_out;
	}
	if (!inspect)
		jc__cachedir_apply_budget(c, c->max_size);
	*out = c;
	return 0;

err_out:
	jc__cachedir_close(c);
	return rc;
}

void jc__cachedir_apply_budget(struct jc_cachedir *c, uint64_t max_size)
{
	uint64_t reserve = max_size / 16;
	reserve = reserve < JC_STORE_FULL_BYTES	     ? JC_STORE_FULL_BYTES
		  : reserve > JC_STORE_RESERVE_BYTES ? JC_STORE_RESERVE_BYTES
						     : reserve;
	jc__store_set_reserve(c->local->store, reserve);
	if (jc__index_set_budget(c->local->wix, max_size) != 0)
		jc_log_warn(INDEX, "write-ahead log size not set: %s",
			    jc__index_errmsg(c->local->wix));
}

int jc__cachedir_lock_check(struct jc_cachedir *c, char *err, size_t errlen)
{
	char path[4200], why[512];
	struct stat ours, now;
	snprintf(path, sizeof(path), "%s/lock", c->dir);
	if (fstat(c->lock_fd, &ours) != 0)
		return 0;
	if (ours.st_nlink > 0 && stat(path, &now) == 0 && now.st_dev == ours.st_dev &&
	    now.st_ino == ours.st_ino)
		return 0;
	int fd = jc__store_lock(c->dir, 0, why, sizeof(why));
	if (fd < 0)
		return jc__fail(err, errlen, fd, "%s was replaced and %s", path, why);
	jc_log_warn(STORE, "%s was removed or replaced; locked a new one", path);
	close(c->lock_fd);
	c->lock_fd = fd;
	return 0;
}

int jc__cachedir_save_counters(struct jc_cachedir *c, const uint64_t v[JC_CTR__COUNT])
{
	return jc__index_counters_save(c->local->wix, jc__counter_names, v, JC_CTR__COUNT);
}

void jc__cachedir_close(struct jc_cachedir *c)
{
	if (!c)
		return;
	uint64_t v[JC_CTR__COUNT];
	if (c->local->store && c->local->wix && jc__counters_take(&c->counters, v) &&
	    jc__cachedir_save_counters(c, v) != 0)
		jc_log_warn(INDEX, "counters not saved: %s", jc__index_errmsg(c->local->wix));
	jc__index_close(c->local->rix);
	jc__index_close(c->local->wix);
	jc__store_close(c->local->store);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	pthread_mutex_destroy(&c->wlock);
	free(c->local);
	free(c->dir);
	free(c);
}
