/* SPDX-License-Identifier: MIT */
/* The SQLite index (index.h): kept requests, named strings (meta), entries
 * by toolchain identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/index_db.h"
#include "jitcache/jitcache.h"

/* --- kept requests (schema 3) ---------------------------------------------- */

/* Steps st (bound) for no row, then resets it. */
static int bound_done(struct jc_index *ix, sqlite3_stmt *st, int rc, const char *what)
{
	if (rc != SQLITE_OK) {
		sqlite3_reset(st);
		return jc__index_fail(ix, rc, what);
	}
	return jc__index_step_done(ix, st, what);
}

int jc__index_request_data(struct jc_index *ix, int64_t id, uint8_t **data, size_t *len)
{
	sqlite3_stmt *st = ix->st[ST_REQ_DATA];
	int rc = sqlite3_bind_int64(st, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(st, 0);
		const void *p = sqlite3_column_blob(st, 0);
		*data = malloc(n ? n : 1);
		if (*data) {
			if (n)
				memcpy(*data, p, n);
			*len = n;
			rc = 0;
		} else {
			rc = JC_ENOMEM;
		}
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : jc__index_fail(ix, rc, "request data");
	}
	sqlite3_reset(st);
	return rc;
}

/* ix->requests from the table, when it is not built yet or holds more ids
 * of removed rows than of rows (a request goes with its last entry). */
static int map_requests(struct jc_index *ix)
{
	uint64_t n = 0, bytes;
	int rc = ix->requests_mapped ? jc__index_request_totals(ix, &n, &bytes) : 0;
	if (rc != 0 || (ix->requests_mapped && ix->requests.n <= 2 * n + 64))
		return rc;
	jc__idmap_clear(&ix->requests);
	ix->requests_mapped = 0;
	sqlite3_stmt *st = ix->st[ST_REQ_SCAN];
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (jc__idmap_add(&ix->requests, (uint32_t)sqlite3_column_int64(st, 1),
				  sqlite3_column_int64(st, 0)) != 0)
			break;
	sqlite3_reset(st);
	if (rc == SQLITE_ROW) {
		jc__idmap_clear(&ix->requests);
		return JC_ENOMEM;
	}
	if (rc != SQLITE_DONE)
		return jc__index_fail(ix, rc, "map requests");
	ix->requests_mapped = 1;
	return 0;
}

/* The id of the request of hash whose bytes are data (len), into *id;
 * JC_ENOTFOUND when there is none. */
static int find_request(struct jc_index *ix, uint32_t hash, const void *data, size_t len,
			int64_t *id)
{
	int rc = map_requests(ix);
	sqlite3_stmt *st = ix->st[ST_REQ_DATA];
	size_t pos = 0;
	int64_t cand;
	while (rc == 0 && jc__idmap_next(&ix->requests, hash, &pos, &cand)) {
		/* a row since removed, or its id taken by other bytes: skipped */
		rc = sqlite3_bind_int64(st, 1, cand);
		if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			int same = (size_t)sqlite3_column_bytes(st, 0) == len &&
				   memcmp(sqlite3_column_blob(st, 0), data, len) == 0;
			sqlite3_reset(st);
			if (same) {
				*id = cand;
				return 0;
			}
			rc = SQLITE_OK;
			continue;
		}
		sqlite3_reset(st);
		rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "find request");
	}
	return rc ? rc : JC_ENOTFOUND;
}

int jc__index_keep_request(struct jc_index *ix, const uint8_t key[16], uint32_t hash, uint32_t uid,
			   const void *data, size_t len)
{
	int64_t id = 0;
	int rc = jc__index_tx(ix, ST_BEGIN);
	if (rc != 0)
		return rc;
	rc = find_request(ix, hash, data, len, &id);
	sqlite3_stmt *st = ix->st[ST_REQ_PUT];
	if (rc == JC_ENOTFOUND) {
		int b = sqlite3_bind_int64(st, 1, hash);
		b = b ?: sqlite3_bind_int64(st, 2, uid);
		b = b ?: sqlite3_bind_blob(st, 3, data, (int)len, SQLITE_STATIC);
		rc = bound_done(ix, st, b, "keep request");
		id = sqlite3_last_insert_rowid(ix->db);
		/* a rolled-back row's id stays mapped: find_request skips it */
		if (rc == 0 && jc__idmap_add(&ix->requests, hash, id) != 0)
			ix->requests_mapped = 0; /* rebuilt at the next keep */
	}
	st = ix->st[ST_REQ_LINK];
	if (rc == 0) {
		int b = sqlite3_bind_int64(st, 1, id);
		b = b ?: sqlite3_bind_blob(st, 2, key, 16, SQLITE_STATIC);
		rc = bound_done(ix, st, b, "keep request");
	}
	/* no entry (gone meanwhile), or it names another: none left unnamed */
	st = ix->st[ST_REQ_UNUSED];
	if (rc == 0)
		rc = bound_done(ix, st, sqlite3_bind_int64(st, 1, id), "keep request");
	return jc__index_tx_end(ix, rc);
}

int jc__index_get_request(struct jc_index *ix, const uint8_t key[16], struct jc_kept *out)
{
	sqlite3_stmt *st = ix->st[ST_REQ_GET];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memcpy(out->key, key, 16);
		out->id = sqlite3_column_int64(st, 0);
		out->size = (uint64_t)sqlite3_column_int64(st, 1);
		out->uid = (uint32_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : jc__index_fail(ix, rc, "get request");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_request_totals(struct jc_index *ix, uint64_t *requests, uint64_t *bytes)
{
	sqlite3_stmt *st = ix->st[ST_REQ_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*requests = (uint64_t)sqlite3_column_int64(st, 0);
		*bytes = (uint64_t)sqlite3_column_int64(st, 1);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : jc__index_fail(ix, rc, "request totals");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_meta_get(struct jc_index *ix, const char *name, char *out, size_t cap)
{
	sqlite3_stmt *st = ix->st[ST_META_GET];
	int rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);
		snprintf(out, cap, "%s", v ? v : "");
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : jc__index_fail(ix, rc, "meta");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_meta_set(struct jc_index *ix, const char *name, const char *value)
{
	sqlite3_stmt *st = ix->st[ST_META_SET];
	int rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);

	rc = rc ?: sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	if (rc != SQLITE_OK) {
		sqlite3_reset(st);
		return jc__index_fail(ix, rc, "meta");
	}
	return jc__index_step_done(ix, st, "meta");
}

int jc__index_foreach_request(struct jc_index *ix, const struct jc_kept_filter *f,
			      int (*cb)(const struct jc_kept *k, void *ctx), void *ctx)
{
	/* Value: hits (the first use counts as one) over days since the last
	 * use plus one: a kernel used daily outranks one used a lot, once. */
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "SELECT e.key, r.id, length(r.data), r.uid, e.versions, e.source_name, e.hits,"
		 " e.last_access FROM entries e CROSS JOIN requests r ON r.id = e.request"
		 " WHERE 1%s%s%s"
		 " ORDER BY (e.hits + 1.0) / (1.0 + max(0, ?1 - e.last_access) / 86400.0) DESC,"
		 " e.key LIMIT ?5",
		 /* ... and not made for that identity already (its request is
		  * shared): the subquery runs once */
		 f->versions_not
		     ? " AND e.versions <> ?2 AND r.id NOT IN (SELECT request FROM entries"
		       " WHERE versions = ?2 AND request IS NOT NULL)"
		     : "",
		 f->accessed_since ? " AND e.last_access >= ?3" : "",
		 f->by_uid ? " AND r.uid = ?4" : "");
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(ix->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "foreach request");
	rc = sqlite3_bind_int64(st, 1, f->now);
	if (rc == SQLITE_OK && f->versions_not)
		rc = sqlite3_bind_text(st, 2, f->versions_not, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->accessed_since)
		rc = sqlite3_bind_int64(st, 3, f->accessed_since);
	if (rc == SQLITE_OK && f->by_uid)
		rc = sqlite3_bind_int64(st, 4, f->uid);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, f->top ? (sqlite3_int64)f->top : -1);
	if (rc != SQLITE_OK) {
		rc = jc__index_fail(ix, rc, "foreach request");
		sqlite3_finalize(st);
		return rc;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct jc_kept k = {0};
		if (sqlite3_column_bytes(st, 0) != 16) {
			snprintf(ix->msg, sizeof(ix->msg), "entry row: bad key column");
			rc = JC_ECORRUPT;
			break;
		}
		memcpy(k.key, sqlite3_column_blob(st, 0), 16);
		k.id = sqlite3_column_int64(st, 1);
		k.size = (uint64_t)sqlite3_column_int64(st, 2);
		k.uid = (uint32_t)sqlite3_column_int64(st, 3);
		const char *v = (const char *)sqlite3_column_text(st, 4);
		const char *n = (const char *)sqlite3_column_text(st, 5);
		k.versions = v ? v : "";
		k.source_name = n ? n : "";
		k.hits = (uint64_t)sqlite3_column_int64(st, 6);
		k.last_access = sqlite3_column_int64(st, 7);
		if ((rc = cb(&k, ctx)) != 0)
			break;
	}
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0 && rc != SQLITE_ROW)
		rc = jc__index_fail(ix, rc, "foreach request");
	sqlite3_finalize(st);
	return rc;
}

int jc__index_count_versions(struct jc_index *ix, const char *versions, uint64_t *n)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(ix->db, "SELECT count(*) FROM entries WHERE versions = ?1", -1,
				    &st, NULL);
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "count versions");
	rc = sqlite3_bind_text(st, 1, versions, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = jc__index_fail(ix, rc, "count versions");
	}
	sqlite3_finalize(st);
	return rc;
}
