/* SPDX-License-Identifier: MIT */
/* The SQLite index (index.h): entries, their users, walks and totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/index_db.h"
#include "jitcache/jitcache.h"

void jc__entry_clear(struct jc_entry *e)
{
	if (!e)
		return;
	free(e->arch);
	free(e->versions);
	free(e->options);
	free(e->source_name);
	free(e->app_abi);
	free(e->log);
	for (size_t i = 0; i < e->n_lowered; i++) {
		free(e->lowered[i].expr);
		free(e->lowered[i].lowered);
	}
	free(e->lowered);
	memset(e, 0, sizeof(*e));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* One length-prefixed string of the lowered blob into a new C string. */
static int take_str(const uint8_t **p, const uint8_t *end, char **out)
{
	uint32_t len;

	if (end - *p < 4)
		return JC_ECORRUPT;
	len = get32(*p);
	*p += 4;
	if ((size_t)(end - *p) < len)
		return JC_ECORRUPT;
	*out = strndup((const char *)*p, len);
	*p += len;
	return *out ? 0 : JC_ENOMEM;
}

static int decode_lowered(const uint8_t *p, size_t size, struct jc_entry *e)
{
	const uint8_t *end = p + size;
	size_t cap = size / 8; /* each pair takes at least 8 bytes */
	int rc;

	if (!size)
		return 0;
	e->lowered = calloc(cap, sizeof(*e->lowered));
	if (!e->lowered)
		return JC_ENOMEM;
	while (p < end) {
		struct jc_lowered *l = &e->lowered[e->n_lowered];

		if (e->n_lowered == cap)
			return JC_ECORRUPT;
		e->n_lowered++;
		rc = take_str(&p, end, &l->expr);
		if (!rc)
			rc = take_str(&p, end, &l->lowered);
		if (rc)
			return rc;
	}
	return 0;
}

/* The lowered blob of e, malloc'd into *out (NULL when there are none). */
static int encode_lowered(const struct jc_entry *e, uint8_t **out, size_t *size)
{
	size_t n = 0;
	uint8_t *p;

	*out = NULL;
	*size = 0;
	for (size_t i = 0; i < e->n_lowered; i++) {
		size_t a = strlen(e->lowered[i].expr), b = strlen(e->lowered[i].lowered);

		if (a > UINT32_MAX || b > UINT32_MAX)
			return JC_EINVAL;
		n += 8 + a + b;
	}
	if (!n)
		return 0;
	p = *out = malloc(n);
	if (!p)
		return JC_ENOMEM;
	for (size_t i = 0; i < e->n_lowered; i++) {
		const char *s[2] = {e->lowered[i].expr, e->lowered[i].lowered};

		for (int j = 0; j < 2; j++) {
			size_t len = strlen(s[j]);

			put32(p, (uint32_t)len);
			memcpy(p + 4, s[j], len);
			p += 4 + len;
		}
	}
	*size = n;
	return 0;
}

static int copy_text(sqlite3_stmt *st, int col, char **out)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	*out = strdup(t ? (const char *)t : "");
	return *out ? 0 : JC_ENOMEM;
}

static int copy_hash(sqlite3_stmt *st, int col, uint8_t out[16])
{
	const void *b = sqlite3_column_blob(st, col);

	if (!b) {
		memset(out, 0, 16);
		return 0;
	}
	if (sqlite3_column_bytes(st, col) != 16)
		return JC_ECORRUPT;
	memcpy(out, b, 16);
	return 0;
}

/* The current row into *e (overwritten; cleared again on failure). */
static int row_to_entry(sqlite3_stmt *st, struct jc_entry *e)
{
	static const int text_cols[] = {C_ARCH,	       C_VERSIONS, C_OPTIONS,
					C_SOURCE_NAME, C_APP_ABI,  C_LOG};
	char **text[] = {&e->arch,	  &e->versions, &e->options,
			 &e->source_name, &e->app_abi,	&e->log};
	int rc;

	memset(e, 0, sizeof(*e));
	e->status = sqlite3_column_int(st, C_STATUS);
	e->error = sqlite3_column_int(st, C_ERROR);
	e->size = (uint64_t)sqlite3_column_int64(st, C_SIZE);
	e->output = (uint32_t)sqlite3_column_int64(st, C_OUTPUT);
	e->created = sqlite3_column_int64(st, C_CREATED);
	e->last_access = sqlite3_column_int64(st, C_LAST_ACCESS);
	e->expires = sqlite3_column_int64(st, C_EXPIRES);
	e->hits = (uint64_t)sqlite3_column_int64(st, C_HITS);
	e->compile_ns = (uint64_t)sqlite3_column_int64(st, C_COMPILE_NS);
	e->charge = (uint64_t)sqlite3_column_int64(st, C_CHARGE);
	rc = copy_hash(st, C_KEY, e->key);
	if (!rc)
		rc = copy_hash(st, C_OBJECT, e->object);
	for (size_t i = 0; !rc && i < sizeof(text_cols) / sizeof(text_cols[0]); i++)
		rc = copy_text(st, text_cols[i], text[i]);
	if (!rc)
		rc = decode_lowered(sqlite3_column_blob(st, C_LOWERED),
				    (size_t)sqlite3_column_bytes(st, C_LOWERED), e);
	if (rc)
		jc__entry_clear(e);
	return rc;
}

/* Steps a bound point lookup into *out, then resets it. */
static int get_row(struct jc_index *ix, sqlite3_stmt *st, struct jc_entry *out)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		rc = row_to_entry(st, out);
		if (rc == JC_ECORRUPT)
			snprintf(ix->msg, sizeof(ix->msg), "get: malformed entry row");
	} else {
		rc = rc == SQLITE_DONE ? JC_ENOTFOUND : jc__index_fail(ix, rc, "get");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_get(struct jc_index *ix, const uint8_t key[16], struct jc_entry *out)
{
	sqlite3_stmt *st = ix->st[ST_GET];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	return rc == SQLITE_OK ? get_row(ix, st, out) : jc__index_fail(ix, rc, "get");
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int jc__index_put(struct jc_index *ix, const struct jc_entry *e)
{
	sqlite3_stmt *st = ix->st[ST_PUT];
	const char *text[] = {e->arch, e->versions, e->options, e->source_name, e->app_abi, e->log};
	static const int text_cols[] = {C_ARCH,	       C_VERSIONS, C_OPTIONS,
					C_SOURCE_NAME, C_APP_ABI,  C_LOG};
	const int64_t ints[][2] = {
	    {C_STATUS, e->status},
	    {C_ERROR, e->error},
	    {C_SIZE, (int64_t)e->size},
	    {C_OUTPUT, e->output},
	    {C_CREATED, e->created},
	    {C_LAST_ACCESS, e->last_access},
	    {C_EXPIRES, e->expires},
	    {C_HITS, (int64_t)e->hits},
	    {C_COMPILE_NS, (int64_t)e->compile_ns},
	};
	uint8_t *lowered;
	size_t n_lowered;
	int rc;

	if (e->status != JC_ENTRY_OK && e->status != JC_ENTRY_FAILED) {
		snprintf(ix->msg, sizeof(ix->msg), "put: bad status %d", e->status);
		return JC_EINVAL;
	}
	rc = encode_lowered(e, &lowered, &n_lowered);
	if (rc)
		return rc;
	/* Parameter ?N binds column N-1 of COLS. */
	rc = sqlite3_bind_blob(st, C_KEY + 1, e->key, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = e->status == JC_ENTRY_OK
			 ? sqlite3_bind_blob(st, C_OBJECT + 1, e->object, 16, SQLITE_STATIC)
			 : sqlite3_bind_null(st, C_OBJECT + 1);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(ints) / sizeof(ints[0]); i++)
		rc = sqlite3_bind_int64(st, (int)ints[i][0] + 1, ints[i][1]);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(text) / sizeof(text[0]); i++)
		rc = sqlite3_bind_text(st, text_cols[i] + 1, or_empty(text[i]), -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = lowered
			 ? sqlite3_bind_blob64(st, C_LOWERED + 1, lowered, n_lowered, SQLITE_STATIC)
			 : sqlite3_bind_null(st, C_LOWERED + 1);
	rc = rc == SQLITE_OK ? jc__index_step_done(ix, st, "put") : jc__index_fail(ix, rc, "put");
	sqlite3_clear_bindings(st);
	free(lowered);
	return rc;
}

int jc__index_put_many(struct jc_index *ix, const struct jc_entry *e, size_t n)
{
	int rc;

	if (!n)
		return 0;
	rc = jc__index_tx(ix, ST_BEGIN);
	for (size_t i = 0; !rc && i < n; i++)
		rc = jc__index_put(ix, &e[i]);
	return jc__index_tx_end(ix, rc);
}

int jc__index_delete(struct jc_index *ix, const uint8_t key[16])
{
	sqlite3_stmt *st = ix->st[ST_DELETE];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	rc = rc == SQLITE_OK ? jc__index_step_done(ix, st, "delete")
			     : jc__index_fail(ix, rc, "delete");
	if (!rc && sqlite3_changes(ix->db) == 0)
		return JC_ENOTFOUND;
	return rc;
}

/* Records that uid used key (hits more) at now; nothing when key is gone. */
static int use(struct jc_index *ix, const uint8_t key[16], uint32_t uid, int64_t now, uint32_t hits)
{
	sqlite3_stmt *st = ix->st[ST_USE];
	int b = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 2, uid);
	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 3, now);
	if (b == SQLITE_OK)
		b = sqlite3_bind_int64(st, 4, hits);
	return b == SQLITE_OK ? jc__index_step_done(ix, st, "use") : jc__index_fail(ix, b, "use");
}

int jc__index_touch(struct jc_index *ix, const uint8_t (*keys)[16], const uint32_t *hits,
		    const uint32_t *uids, size_t n, int64_t now)
{
	sqlite3_stmt *st = ix->st[ST_TOUCH];
	int rc;

	if (!n)
		return 0;
	rc = jc__index_tx(ix, ST_BEGIN);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		int b = sqlite3_bind_blob(st, 1, keys[i], 16, SQLITE_STATIC);

		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 2, hits ? hits[i] : 0);
		if (b == SQLITE_OK)
			b = sqlite3_bind_int64(st, 3, now);
		rc = b == SQLITE_OK ? jc__index_step_done(ix, st, "touch")
				    : jc__index_fail(ix, b, "touch");
		if (!rc && uids)
			rc = use(ix, keys[i], uids[i], now, hits ? hits[i] : 0);
	}
	return jc__index_tx_end(ix, rc);
}

int jc__index_put_user(struct jc_index *ix, const struct jc_entry *e, uint32_t uid)
{
	int rc = jc__index_tx(ix, ST_BEGIN);

	rc = rc ? rc : jc__index_put(ix, e);
	rc = rc ? rc : use(ix, e->key, uid, e->last_access, 0);
	return jc__index_tx_end(ix, rc);
}

int jc__index_get_user(struct jc_index *ix, const uint8_t key[16], uint32_t uid,
		       struct jc_entry *out)
{
	sqlite3_stmt *st = ix->st[ST_GET_USER];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, uid);
	return rc == SQLITE_OK ? get_row(ix, st, out) : jc__index_fail(ix, rc, "get");
}

int jc__index_unuse(struct jc_index *ix, const uint8_t key[16], uint32_t uid, uint64_t *left)
{
	sqlite3_stmt *st = ix->st[ST_UNUSE];
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, uid);
	rc = rc == SQLITE_OK ? jc__index_step_done(ix, st, "unuse")
			     : jc__index_fail(ix, rc, "unuse");
	if (rc)
		return rc;
	*left = 0;
	return jc__index_users_of(ix, key, NULL, left);
}

int jc__index_users_of(struct jc_index *ix, const uint8_t key[16], uint32_t *uids, uint64_t *n)
{
	sqlite3_stmt *st = ix->st[ST_USERS_OF];
	uint64_t cap = *n, found = 0;
	int rc = sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);

	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "users of");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (uids && found < cap)
			uids[found] = (uint32_t)sqlite3_column_int64(st, 0);
		found++;
	}
	rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "users of");
	sqlite3_reset(st);
	*n = found;
	return rc;
}

int jc__index_keys_with_prefix(struct jc_index *ix, const char *hex, int64_t uid,
			       uint8_t (*keys)[16], size_t *n)
{
	uint8_t lo[16], hi[16];
	size_t len = strlen(hex), cap = *n, found = 0;
	if (len == 0 || len > 32)
		return JC_EINVAL;
	memset(lo, 0, sizeof(lo));
	memset(hi, 0xff, sizeof(hi));
	for (size_t i = 0; i < len; i++) {
		char c = hex[i];
		int v = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (v < 0)
			return JC_EINVAL;
		int shift = i % 2 ? 0 : 4;
		lo[i / 2] = (uint8_t)((lo[i / 2] & ~(0xf << shift)) | (v << shift));
		hi[i / 2] = (uint8_t)((hi[i / 2] & ~(0xf << shift)) | (v << shift));
	}
	sqlite3_stmt *st = ix->st[uid < 0 ? ST_PREFIX : ST_PREFIX_USER];
	int rc = sqlite3_bind_blob(st, 1, lo, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_blob(st, 2, hi, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, (int64_t)cap);
	if (rc == SQLITE_OK && uid >= 0)
		rc = sqlite3_bind_int64(st, 4, uid);
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "key prefix");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (found < cap && sqlite3_column_bytes(st, 0) == 16)
			memcpy(keys[found++], sqlite3_column_blob(st, 0), 16);
	}
	rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "key prefix");
	sqlite3_reset(st);
	*n = found;
	return rc;
}

static void user_totals_of(sqlite3_stmt *st, int col, struct jc_user_totals *t)
{
	t->entries = (uint64_t)sqlite3_column_int64(st, col);
	t->negative = (uint64_t)sqlite3_column_int64(st, col + 1);
	t->bytes = (uint64_t)sqlite3_column_int64(st, col + 2);
	t->hits = (uint64_t)sqlite3_column_int64(st, col + 3);
	t->stored = (uint64_t)sqlite3_column_int64(st, col + 4);
}

int jc__index_user_totals(struct jc_index *ix, uint32_t uid, struct jc_user_totals *t)
{
	sqlite3_stmt *st = ix->st[ST_USER_TOTALS];
	int rc = sqlite3_bind_int64(st, 1, uid);

	memset(t, 0, sizeof(*t));
	t->uid = uid;
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "user totals");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		user_totals_of(st, 0, t);
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "user totals");
	sqlite3_reset(st);
	return rc;
}

int jc__index_foreach_user_totals(struct jc_index *ix,
				  int (*cb)(const struct jc_user_totals *t, void *ctx), void *ctx)
{
	sqlite3_stmt *st = ix->st[ST_ALL_USER_TOTALS];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct jc_user_totals t;

		t.uid = (uint32_t)sqlite3_column_int64(st, 0);
		user_totals_of(st, 1, &t);
		rc = cb(&t, ctx);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "user totals");
out:
	sqlite3_reset(st);
	return rc;
}

/* Appends " AND <cond>" to the foreach SQL. */
#define ADD(cond) (len += (size_t)snprintf(sql + len, sizeof(sql) - len, " AND %s", (cond)))

int jc__index_foreach(struct jc_index *ix, const struct jc_filter *f,
		      int (*cb)(const struct jc_entry *e, void *ctx), void *ctx)
{
	static const struct jc_filter all;
	static const char from_all[] = "SELECT " COLS ", " CHARGE("e") " FROM entries e WHERE 1";
	/* One uid's view: its rows of users, in its own LRU order (users_lru). */
	static const char from_user[] =
	    "SELECT " COLS_USER ", " CHARGE("e") " FROM users u CROSS JOIN entries e"
						 " ON e.key = u.key WHERE u.uid = ?8";
	char sql[sizeof(from_user) + 512];
	size_t len;
	struct jc_entry e;
	sqlite3_stmt *st;
	int rc;

	f = f ? f : &all;
	len = (size_t)snprintf(sql, sizeof(sql), "%s", f->by_uid ? from_user : from_all);
	if (f->status < JC_FILTER_ANY || f->status > JC_FILTER_FAILED) {
		snprintf(ix->msg, sizeof(ix->msg), "foreach: bad status filter %d", f->status);
		return JC_EINVAL;
	}
	/* Numbered parameters: ?1 status, ?2 created, ?3 accessed, ?4 expired, ?5 arch,
	 * ?6 versions, ?7 key; only those of present conditions are bound. */
	if (f->status)
		ADD("e.status = ?1");
	if (f->created_before)
		ADD(f->by_uid ? "u.created < ?2" : "e.created < ?2");
	if (f->accessed_before)
		ADD(f->by_uid ? "u.last_access < ?3" : "e.last_access < ?3");
	if (f->expired_at)
		ADD("e.status = 1 AND e.expires <= ?4");
	if (f->arch)
		ADD("e.arch = ?5");
	if (f->versions_not)
		ADD("e.versions <> ?6");
	if (f->key)
		ADD(f->by_uid ? "u.key = ?7" : "e.key = ?7");
	snprintf(sql + len, sizeof(sql) - len,
		 f->by_uid ? " ORDER BY u.last_access, u.key" : " ORDER BY e.last_access, e.key");

	rc = sqlite3_prepare_v2(ix->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return jc__index_fail(ix, rc, "foreach");
	if (f->status)
		rc = sqlite3_bind_int(st, 1, f->status == JC_FILTER_OK ? 0 : 1);
	if (rc == SQLITE_OK && f->created_before)
		rc = sqlite3_bind_int64(st, 2, f->created_before);
	if (rc == SQLITE_OK && f->accessed_before)
		rc = sqlite3_bind_int64(st, 3, f->accessed_before);
	if (rc == SQLITE_OK && f->expired_at)
		rc = sqlite3_bind_int64(st, 4, f->expired_at);
	if (rc == SQLITE_OK && f->arch)
		rc = sqlite3_bind_text(st, 5, f->arch, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->versions_not)
		rc = sqlite3_bind_text(st, 6, f->versions_not, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->key)
		rc = sqlite3_bind_blob(st, 7, f->key, 16, SQLITE_STATIC);
	if (rc == SQLITE_OK && f->by_uid)
		rc = sqlite3_bind_int64(st, 8, f->uid);
	if (rc != SQLITE_OK) {
		rc = jc__index_fail(ix, rc, "foreach");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = row_to_entry(st, &e);
		if (rc) {
			snprintf(ix->msg, sizeof(ix->msg), "foreach: malformed entry row");
			goto out;
		}
		rc = cb(&e, ctx);
		jc__entry_clear(&e);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : jc__index_fail(ix, rc, "foreach");
out:
	sqlite3_finalize(st);
	return rc;
}
#undef ADD

int jc__index_totals(struct jc_index *ix, uint64_t *entries, uint64_t *negative_entries,
		     uint64_t *bytes)
{
	sqlite3_stmt *st = ix->st[ST_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		if (entries)
			*entries = (uint64_t)sqlite3_column_int64(st, 0);
		if (negative_entries)
			*negative_entries = (uint64_t)sqlite3_column_int64(st, 1);
		if (bytes)
			*bytes = (uint64_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : jc__index_fail(ix, rc, "totals");
		if (rc == JC_ECORRUPT)
			snprintf(ix->msg, sizeof(ix->msg), "totals: row missing");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_stored(struct jc_index *ix, uint64_t *stored)
{
	sqlite3_stmt *st = ix->st[ST_TOTALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*stored = (uint64_t)sqlite3_column_int64(st, 3);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? JC_ECORRUPT : jc__index_fail(ix, rc, "totals");
	}
	sqlite3_reset(st);
	return rc;
}

int jc__index_reclaim(struct jc_index *ix)
{
	/* The file shrinks when the WAL is copied back into it: now. */
	int rc = sqlite3_exec(ix->db, "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(PASSIVE)",
			      NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : jc__index_fail(ix, rc, "incremental vacuum");
}

int jc__index_object_refs(struct jc_index *ix, const uint8_t object[16], uint64_t *n)
{
	sqlite3_stmt *st = ix->st[ST_REFS];
	int rc = sqlite3_bind_blob(st, 1, object, 16, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = jc__index_fail(ix, rc, "object refs");
	}
	sqlite3_reset(st);
	return rc;
}
