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
#include "jitcache/jitcache.h"

/* --- the local tier ----------------------------------------------------- */

static int local_lookup(struct jc_cachedir *c, const uint8_t key[16], struct jc_entry *out)
{
	int rc = jc__index_get(c->rix ? c->rix : c->wix, key, out);
	if (rc != 0)
		jc__entry_clear(out);
	return rc;
}

static int local_open_object(struct jc_cachedir *c, const struct jc_entry *e, int *fd)
{
	return jc__store_open_object(c->store, e->object, e->size, fd);
}

static int local_object_is(struct jc_cachedir *c, const struct jc_entry *e, const struct stat *st)
{
	return jc__store_object_is(c->store, e->object, e->size, st);
}

static int local_verify(struct jc_cachedir *c, const struct jc_entry *e)
{
	int fd = -1;
	int rc = jc__store_open_object(c->store, e->object, e->size, &fd);
	if (rc == 0) {
		rc = jc__store_verify_fd(fd, e->object, e->size);
		close(fd);
	}
	return rc;
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
	if (jc__store_disk_full(c->store, NULL))
		return jc__fail(err, errlen, JC_ENOSPC, "disk full (%s): nothing is stored until space "
				"returns", strerror(ENOSPC));
	/* The object first, outside the lock (its fsyncs are the slow part). */
	if (ok)
		rc = jc__store_put(c->store, data, size, e->object, err, errlen);
	pthread_mutex_lock(&c->wlock);
	/* The put may have kept an existing object (same content) that a purge,
	 * eviction or gc, all under wlock, removed since: store it again, so the
	 * row never names a missing object. */
	if (ok && rc == 0 && jc__store_open_object(c->store, e->object, size, &fd) == JC_ENOTFOUND)
		rc = jc__store_put(c->store, data, size, e->object, err, errlen);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (rc = jc__index_put_user(c->wix, e, uid)) != 0)
		snprintf(err, errlen, "index: %s", jc__index_errmsg(c->wix));
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

static int local_quarantine(struct jc_cachedir *c, const uint8_t object[16])
{
	return jc__store_quarantine(c->store, object);
}

static int local_drop_row(struct jc_cachedir *c, const uint8_t key[16], const uint8_t object[16])
{
	struct jc_entry e = {0};
	int rc = 0;
	pthread_mutex_lock(&c->wlock);
	if (jc__index_get(c->wix, key, &e) == 0 && e.status == JC_ENTRY_OK &&
	    memcmp(e.object, object, 16) == 0 && (rc = jc__index_delete(c->wix, key)) != 0)
		jc_log_warn(INDEX, "row of a bad object not deleted: %s", jc__index_errmsg(c->wix));
	pthread_mutex_unlock(&c->wlock);
	jc__entry_clear(&e);
	return rc;
}

/* The row, then its object if no other row names it. */
static int remove_once(struct jc_cachedir *c, const struct jc_entry *e)
{
	int rc = jc__index_delete(c->wix, e->key);
	if (rc == JC_ENOTFOUND)
		return 0;
	if (rc != 0 || e->status)
		return rc;
	uint64_t refs = 0;
	rc = jc__index_object_refs(c->wix, e->object, &refs);
	if (rc == 0 && refs == 0) {
		rc = jc__store_remove(c->store, e->object);
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
	if (rc == JC_ENOSPC && jc__store_reserve_release(c->store))
		rc = remove_once(c, e);
	return rc;
}

static int local_unlink_ahead(struct jc_cachedir *c, const struct jc_entry *e)
{
	uint64_t refs = 0;
	return e->status == JC_ENTRY_OK && jc__index_object_refs(c->wix, e->object, &refs) == 0 &&
	       refs == 1 && jc__store_remove(c->store, e->object) == 0;
}

static int local_remove_bad(struct jc_cachedir *c, const struct jc_entry *e)
{
	/* The row first, as for any removal: no row names a missing object. */
	int rc = jc__index_delete(c->wix, e->key);
	jc__store_quarantine(c->store, e->object);
	return rc;
}

static int local_foreach(struct jc_cachedir *c, const struct jc_filter *f,
			 int (*cb)(const struct jc_entry *e, void *ctx), void *ctx)
{
	return jc__index_foreach(c->wix, f, cb, ctx);
}

static int local_foreach_request(struct jc_cachedir *c, const struct jc_kept_filter *f,
				 int (*cb)(const struct jc_kept *k, void *ctx), void *ctx)
{
	return jc__index_foreach_request(c->wix, f, cb, ctx);
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
		int rc = jc__index_object_refs(g->c->wix, hash, &refs);
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
	return jc__store_foreach(c->store, collect_cb, &g);
}

static int local_health(struct jc_cachedir *c, struct jc_tier_health *out)
{
	memset(out, 0, sizeof(*out));
	return jc__index_totals(c->wix, &out->entries, &out->negative_entries, &out->bytes);
}

const struct jc_tier_ops jc__local_tier = {
	.name = "local",
	.lookup = local_lookup,
	.open_object = local_open_object,
	.object_is = local_object_is,
	.verify = local_verify,
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
};

/* --- opening a cache directory ------------------------------------------ */

static int load_budget(const char *name, uint64_t value, void *ctx)
{
	struct jc_cachedir *c = ctx;
	if (strcmp(name, JC_STORED_MAX_SIZE) == 0)
		c->max_size = value;
	else if (strcmp(name, JC_STORED_USER_MAX_SIZE) == 0)
		c->user_max_size = value;
	return 0;
}

int jc__cachedir_open_reader(struct jc_cachedir *c, struct jc_index **out, char *err, size_t errlen)
{
	char path[4200];
	if (snprintf(path, sizeof(path), "%s/index.sqlite", c->dir) >= (int)sizeof(path))
		return jc__fail(err, errlen, JC_EINVAL, "cache directory path too long: %s", c->dir);
	return jc__index_open(path, 1, out, err, errlen);
}

int jc__cachedir_open(const char *dir, unsigned flags, int wait_ms, struct jc_cachedir **out,
		      char *err, size_t errlen)
{
	const int inspect = (flags & JC_CACHEDIR_INSPECT) != 0;
	char path[4200];
	struct stat st;
	struct jc_cachedir *c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(dir))) {
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
		rc = jc__store_open(dir, &c->store, err, errlen);
		if (rc != 0)
			goto err_out;
	}
	if (stat(dir, &st) != 0) {
		rc = jc__fail(err, errlen, JC_EIO, "cannot stat %s: %s", dir, strerror(errno));
		goto err_out;
	}
	c->dev = (uint64_t)st.st_dev;
	c->ino = (uint64_t)st.st_ino;
	rc = jc__index_open(path, inspect, &c->wix, err, errlen);
	if (rc == 0 && !inspect && (flags & JC_CACHEDIR_READER))
		rc = jc__index_open(path, 1, &c->rix, err, errlen);
	if (rc != 0)
		goto err_out;
	rc = jc__counters_load_array(c->wix, c->counters.v);
	rc = rc ?: jc__index_counters_load(c->wix, load_budget, c);
	if (rc != 0) {
		snprintf(err, errlen, "index %s: counters: %s", path, jc__index_errmsg(c->wix));
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
	reserve = reserve < JC_STORE_FULL_BYTES ? JC_STORE_FULL_BYTES
		  : reserve > JC_STORE_RESERVE_BYTES ? JC_STORE_RESERVE_BYTES : reserve;
	jc__store_set_reserve(c->store, reserve);
	if (jc__index_set_budget(c->wix, max_size) != 0)
		jc_log_warn(INDEX, "write-ahead log size not set: %s", jc__index_errmsg(c->wix));
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
	return jc__index_counters_save(c->wix, jc__counter_names, v, JC_CTR__COUNT);
}

void jc__cachedir_close(struct jc_cachedir *c)
{
	if (!c)
		return;
	uint64_t v[JC_CTR__COUNT];
	if (c->store && c->wix && jc__counters_take(&c->counters, v) &&
	    jc__cachedir_save_counters(c, v) != 0)
		jc_log_warn(INDEX, "counters not saved: %s", jc__index_errmsg(c->wix));
	jc__index_close(c->rix);
	jc__index_close(c->wix);
	jc__store_close(c->store);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	pthread_mutex_destroy(&c->wlock);
	free(c->dir);
	free(c);
}
