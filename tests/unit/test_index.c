/* SPDX-License-Identifier: MIT */
/* The SQLite index, on a real database in a mkdtemp directory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/index.h"
#include "jitcache/jitcache.h"
#include "tests/lib/test.h"

struct fx {
	char dir[JTL_ROOT_MAX];
	char path[128];
	struct jc_index *ix;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	jct_tmpdir(f->dir, NULL, "index");
	snprintf(f->path, sizeof(f->path), "%s/index.sqlite", f->dir);
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	jc__index_close(f->ix);
	jct_tmpdir_remove(f->dir);
	free(f);
	return 0;
}

static int64_t pragma_of(const char *path, const char *pragma);

static void reopen(struct fx *f)
{
	char err[256];

	jc__index_close(f->ix);
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
}

static void mkkey(uint8_t k[16], int i)
{
	memset(k, 0, 16);
	k[0] = 0x4b;
	k[12] = (uint8_t)(i >> 24);
	k[13] = (uint8_t)(i >> 16);
	k[14] = (uint8_t)(i >> 8);
	k[15] = (uint8_t)i;
}

/* A borrowed-pointer entry for put (strings are literals). */
static struct jc_entry mkentry(int i, int status, int64_t access)
{
	struct jc_entry e = {
	    .status = status,
	    .error = status ? JC_ECOMPILE : 0,
	    .size = status ? 0 : 100u + i,
	    .output = JC_OUTPUT_CUBIN,
	    .arch = (char *)"sm_90",
	    .versions = (char *)"v1",
	    .options = (char *)"-O3",
	    .source_name = (char *)"k.cu",
	    .app_abi = (char *)"",
	    .log = (char *)"",
	    .created = 1000 + i,
	    .last_access = access,
	    .expires = status ? 5000 + i : 0,
	};

	mkkey(e.key, i);
	memset(e.object, 0xb0 + (i % 4), 16);
	return e;
}

static void put_ok(struct fx *f, const struct jc_entry *e)
{
	assert_int_equal(jc__index_put(f->ix, e), 0);
}

static void test_round_trip(void **state)
{
	struct fx *f = *state;
	struct jc_lowered low[3] = {
	    {(char *)"&saxpy<float>", (char *)"_Z5saxpyIfEvPT_S1_f"},
	    {(char *)"&saxpy<double>", (char *)"_Z5saxpyIdEvPT_S1_d"},
	    {(char *)"", (char *)""},
	};
	size_t big = 1 << 20;
	char *log = malloc(big + 1);
	struct jc_entry e = mkentry(1, 0, 1234), g = {0};

	assert_non_null(log);
	for (size_t i = 0; i < big; i++)
		log[i] = (char)('a' + i % 26);
	log[big] = '\0';
	e.error = 0;
	e.size = 0x123456789ull;
	e.output = JC_OUTPUT_PTX;
	e.arch = (char *)"sm_90a";
	e.versions = (char *)"nvrtc 12.4 (build abc); driver 550.54";
	e.options = (char *)"-std=c++17 -DN=4";
	e.source_name = (char *)"saxpy.cu";
	e.app_abi = (char *)"myapp-3";
	e.log = log;
	e.created = 1700000000;
	e.last_access = 1700000100;
	e.expires = 0;
	e.hits = 7;
	e.compile_ns = 123456789012ull;
	e.lowered = low;
	e.n_lowered = 3;
	put_ok(f, &e);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), 0);
	assert_memory_equal(g.key, e.key, 16);
	assert_int_equal(g.status, 0);
	assert_int_equal(g.error, 0);
	assert_memory_equal(g.object, e.object, 16);
	assert_int_equal(g.size, 0x123456789ull);
	assert_int_equal(g.output, JC_OUTPUT_PTX);
	assert_string_equal(g.arch, e.arch);
	assert_string_equal(g.versions, e.versions);
	assert_string_equal(g.options, e.options);
	assert_string_equal(g.source_name, e.source_name);
	assert_string_equal(g.app_abi, e.app_abi);
	assert_string_equal(g.log, log);
	assert_int_equal(g.created, 1700000000);
	assert_int_equal(g.last_access, 1700000100);
	assert_int_equal(g.expires, 0);
	assert_int_equal(g.hits, 7);
	assert_int_equal(g.compile_ns, 123456789012ull);
	assert_int_equal(g.n_lowered, 3);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(g.lowered[i].expr, low[i].expr);
		assert_string_equal(g.lowered[i].lowered, low[i].lowered);
	}
	jc__entry_clear(&g);
	assert_null(g.log);
	jc__entry_clear(NULL);

	/* A failure with NULL strings: stored as "", object NULL, no lowered names. */
	e = (struct jc_entry){.status = 1, .error = JC_ECOMPILE, .expires = 99};
	mkkey(e.key, 2);
	memset(e.object, 0xff, 16);
	put_ok(f, &e);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), 0);
	assert_int_equal(g.status, 1);
	assert_int_equal(g.error, JC_ECOMPILE);
	assert_int_equal(g.expires, 99);
	assert_string_equal(g.arch, "");
	assert_string_equal(g.log, "");
	assert_null(g.lowered);
	assert_int_equal(g.n_lowered, 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(g.object[i], 0);
	jc__entry_clear(&g);

	e.status = 3;
	assert_int_equal(jc__index_put(f->ix, &e), JC_EINVAL);
	mkkey(e.key, 3);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), JC_ENOTFOUND);
	free(log);
}

static void test_replace_delete(void **state)
{
	struct fx *f = *state;
	struct jc_entry e = mkentry(1, 1, 10), g = {0};
	uint64_t n, neg, bytes;

	put_ok(f, &e);
	assert_int_equal(jc__index_totals(f->ix, &n, &neg, &bytes), 0);
	assert_true(n == 1 && neg == 1 && bytes == 0);
	e = mkentry(1, 0, 20);
	e.log = (char *)"warning: unused";
	put_ok(f, &e);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), 0);
	assert_int_equal(g.status, 0);
	assert_int_equal(g.last_access, 20);
	assert_string_equal(g.log, "warning: unused");
	jc__entry_clear(&g);
	assert_int_equal(jc__index_totals(f->ix, &n, &neg, &bytes), 0);
	assert_true(n == 1 && neg == 0 && bytes == 101);
	e.size = 5000;
	put_ok(f, &e);
	assert_int_equal(jc__index_totals(f->ix, NULL, NULL, &bytes), 0);
	assert_int_equal(bytes, 5000);

	assert_int_equal(jc__index_delete(f->ix, e.key), 0);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), JC_ENOTFOUND);
	assert_int_equal(jc__index_delete(f->ix, e.key), JC_ENOTFOUND);
	assert_int_equal(jc__index_totals(f->ix, &n, &neg, &bytes), 0);
	assert_true(n == 0 && neg == 0 && bytes == 0);
}

static void test_touch(void **state)
{
	struct fx *f = *state;
	uint8_t keys[4][16];
	uint32_t hits[4] = {1, 5, 0, 9};
	struct jc_entry g = {0};

	for (int i = 0; i < 3; i++) {
		struct jc_entry e = mkentry(i, 0, 100);

		put_ok(f, &e);
		mkkey(keys[i], i);
	}
	mkkey(keys[3], 77); /* evicted meanwhile: skipped */
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, hits, NULL, 4, 500), 0);
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, hits, NULL, 2, 600), 0);
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, NULL, NULL, 1, 700), 0);
	assert_int_equal(jc__index_touch(f->ix, NULL, NULL, NULL, 0, 800), 0);
	for (int i = 0; i < 3; i++) {
		static const uint64_t want_hits[3] = {2, 10, 0};
		static const int64_t want_at[3] = {700, 600, 500};

		assert_int_equal(jc__index_get(f->ix, keys[i], &g), 0);
		assert_int_equal(g.hits, want_hits[i]);
		assert_int_equal(g.last_access, want_at[i]);
		jc__entry_clear(&g);
	}
	assert_int_equal(jc__index_get(f->ix, keys[3], &g), JC_ENOTFOUND);
}

struct walk {
	int n;
	int ids[64];
	int64_t last;
	struct jc_index *del; /* delete each visited entry through this */
	int stop_at;
};

static int walk_cb(const struct jc_entry *e, void *ctx)
{
	struct walk *w = ctx;

	assert_true(e->last_access >= w->last);
	w->last = e->last_access;
	assert_non_null(e->arch);
	w->ids[w->n++] = e->key[15];
	if (w->del)
		assert_int_equal(jc__index_delete(w->del, e->key), 0);
	return w->stop_at && w->n == w->stop_at ? 1234 : 0;
}

static int walk(struct fx *f, const struct jc_filter *flt, struct walk *w)
{
	memset(w, 0, sizeof(*w));
	return jc__index_foreach(f->ix, flt, walk_cb, w);
}

static void test_foreach(void **state)
{
	struct fx *f = *state;
	struct jc_filter flt;
	struct walk w;
	uint8_t key[16];

	/* id: status, last_access, created = 1000 + id, arch, versions */
	static const struct {
		int status;
		int64_t access;
		const char *arch, *vers;
	} rows[] = {
	    {0, 300, "sm_90", "v1"}, {1, 100, "sm_90", "v1"}, {0, 200, "sm_80", "v2"},
	    {1, 200, "sm_80", "v1"}, {0, 50, "sm_90", "v2"},
	};
	for (int i = 0; i < 5; i++) {
		struct jc_entry e = mkentry(i, rows[i].status, rows[i].access);

		e.arch = (char *)rows[i].arch;
		e.versions = (char *)rows[i].vers;
		put_ok(f, &e);
	}
	/* All, in LRU order (ties by key). */
	assert_int_equal(walk(f, NULL, &w), 0);
	assert_int_equal(w.n, 5);
	{
		static const int order[] = {4, 1, 2, 3, 0};
		assert_memory_equal(w.ids, order, sizeof(order));
	}
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 5);

	flt.status = JC_FILTER_OK;
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 3);
	flt.status = JC_FILTER_FAILED;
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);
	flt.status = 7;
	assert_int_equal(walk(f, &flt, &w), JC_EINVAL);

	memset(&flt, 0, sizeof(flt));
	flt.created_before = 1002; /* ids 0, 1 */
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);
	assert_true(w.ids[0] == 1 && w.ids[1] == 0);

	memset(&flt, 0, sizeof(flt));
	flt.accessed_before = 200; /* ids 4, 1 */
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);

	memset(&flt, 0, sizeof(flt));
	flt.expired_at = 5002; /* failed with expires <= 5002: id 1 (5001); id 3 has 5003 */
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.ids[0], 1);
	flt.expired_at = 5003;
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);

	memset(&flt, 0, sizeof(flt));
	flt.arch = "sm_80";
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);

	memset(&flt, 0, sizeof(flt));
	flt.versions_not = "v1";
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);
	assert_true(w.ids[0] == 4 && w.ids[1] == 2);

	memset(&flt, 0, sizeof(flt));
	mkkey(key, 3);
	flt.key = key;
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.ids[0], 3);

	/* Combined: ok entries on sm_90 not accessed since 250. */
	memset(&flt, 0, sizeof(flt));
	flt.status = JC_FILTER_OK;
	flt.arch = "sm_90";
	flt.accessed_before = 250;
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.ids[0], 4);

	/* Stop early: cb's value comes back. */
	memset(&w, 0, sizeof(w));
	w.stop_at = 2;
	assert_int_equal(jc__index_foreach(f->ix, NULL, walk_cb, &w), 1234);
	assert_int_equal(w.n, 2);

	/* Eviction-style walk deleting through the same handle. */
	memset(&w, 0, sizeof(w));
	w.del = f->ix;
	memset(&flt, 0, sizeof(flt));
	flt.status = JC_FILTER_FAILED;
	assert_int_equal(jc__index_foreach(f->ix, &flt, walk_cb, &w), 0);
	assert_int_equal(w.n, 2);
	{
		uint64_t n, neg;

		assert_int_equal(jc__index_totals(f->ix, &n, &neg, NULL), 0);
		assert_true(n == 3 && neg == 0);
	}
	reopen(f);
	assert_int_equal(walk(f, NULL, &w), 0);
	assert_int_equal(w.n, 3);
}

static void test_totals_refs(void **state)
{
	struct fx *f = *state;
	uint64_t n, neg, bytes, refs;
	uint8_t obj[16];

	for (int i = 0; i < 10; i++) {
		struct jc_entry e = mkentry(i, i % 3 == 0, 100);

		put_ok(f, &e);
	}
	/* ok: 1 2 4 5 7 8 -> sizes 101+102+104+105+107+108 = 627 */
	assert_int_equal(jc__index_totals(f->ix, &n, &neg, &bytes), 0);
	assert_int_equal(n, 10);
	assert_int_equal(neg, 4);
	assert_int_equal(bytes, 627);
	/* object 0xb1: ids 1 5 9 (9 failed, not counted) */
	memset(obj, 0xb1, 16);
	assert_int_equal(jc__index_object_refs(f->ix, obj, &refs), 0);
	assert_int_equal(refs, 2);
	memset(obj, 0x01, 16);
	assert_int_equal(jc__index_object_refs(f->ix, obj, &refs), 0);
	assert_int_equal(refs, 0);
	/* Survives reopen (kept in the file by triggers). */
	reopen(f);
	assert_int_equal(jc__index_totals(f->ix, &n, &neg, &bytes), 0);
	assert_true(n == 10 && neg == 4 && bytes == 627);
}

/* put_many: every entry lands, in one transaction; a bad one stores none. */
static void test_put_many(void **state)
{
	struct fx *f = *state;
	struct jc_entry e[5], got = {0};
	uint64_t n;

	assert_int_equal(jc__index_put_many(f->ix, NULL, 0), 0);
	for (int i = 0; i < 5; i++)
		e[i] = mkentry(i, i == 4, 100);
	assert_int_equal(jc__index_put_many(f->ix, e, 5), 0);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, NULL), 0);
	assert_int_equal(n, 5);
	assert_int_equal(jc__index_get(f->ix, e[3].key, &got), 0);
	assert_int_equal(got.size, 103);
	jc__entry_clear(&got);
	for (int i = 0; i < 5; i++)
		e[i] = mkentry(10 + i, 0, 100);
	e[3].status = 7;
	assert_int_equal(jc__index_put_many(f->ix, e, 5), JC_EINVAL);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, NULL), 0);
	assert_int_equal(n, 5);
	assert_int_equal(jc__index_get(f->ix, e[0].key, &got), JC_ENOTFOUND);
	/* Still usable after the rollback. */
	e[3].status = 0;
	assert_int_equal(jc__index_put_many(f->ix, e, 5), 0);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, NULL), 0);
	assert_int_equal(n, 10);
}

struct counters {
	int n;
	char names[8][32];
	uint64_t values[8];
};

static int counter_cb(const char *name, uint64_t value, void *ctx)
{
	struct counters *c = ctx;

	snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
	c->values[c->n++] = value;
	return 0;
}

static void test_counters(void **state)
{
	struct fx *f = *state;
	const char *names[] = {"misses", "hits", "evictions"};
	uint64_t values[] = {3, 1ull << 40, 0};
	struct counters c = {0};

	assert_int_equal(jc__index_counters_load(f->ix, counter_cb, &c), 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(jc__index_counters_save(f->ix, names, values, 3), 0);
	values[0] = 4;
	assert_int_equal(jc__index_counters_save(f->ix, names, values, 1), 0);
	reopen(f);
	assert_int_equal(jc__index_counters_load(f->ix, counter_cb, &c), 0);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.names[0], "evictions");
	assert_int_equal(c.values[0], 0);
	assert_string_equal(c.names[1], "hits");
	assert_int_equal(c.values[1], 1ull << 40);
	assert_string_equal(c.names[2], "misses");
	assert_int_equal(c.values[2], 4);
}

static void sql(const char *path, const char *stmt)
{
	sqlite3 *db;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, stmt, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static void expect_fresh(struct fx *f, const char *aside)
{
	struct jc_entry e = mkentry(1, 0, 1), g = {0};
	uint64_t n = 99;
	char old[160];

	snprintf(old, sizeof(old), "%s/%s", f->dir, aside);
	assert_int_equal(access(old, F_OK), 0);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, NULL), 0);
	assert_int_equal(n, 0);
	put_ok(f, &e);
	assert_int_equal(jc__index_get(f->ix, e.key, &g), 0);
	jc__entry_clear(&g);
}

static void test_future_version(void **state)
{
	struct fx *f = *state;
	struct jc_index *ro;
	struct jc_entry e = mkentry(1, 0, 1);
	char err[256];

	put_ok(f, &e);
	jc__index_close(f->ix);
	f->ix = NULL;
	sql(f->path, "PRAGMA user_version = 99");
	/* Read-only: reported, nothing moved. */
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), JC_EVERSION);
	assert_non_null(strstr(err, "version 99"));
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
	expect_fresh(f, "index.sqlite.old-1");

	/* Another application's database. */
	jc__index_close(f->ix);
	f->ix = NULL;
	unlink(f->path);
	sql(f->path, "CREATE TABLE t(x); PRAGMA user_version = 1");
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
	expect_fresh(f, "index.sqlite.old-2");

	/* Our application id and version but a schema we do not know. */
	jc__index_close(f->ix);
	f->ix = NULL;
	unlink(f->path);
	sql(f->path, "CREATE TABLE entries(x); PRAGMA user_version = 1;"
		     " PRAGMA application_id = 1245922120");
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
	expect_fresh(f, "index.sqlite.old-3");
}

static void test_corrupt_file(void **state)
{
	struct fx *f = *state;
	struct jc_index *ro;
	char err[256], old[160];
	uint8_t junk[8192];
	int fd;

	jc__index_close(f->ix);
	f->ix = NULL;
	unlink(f->path);
	srand(42);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), JC_ECORRUPT);
	assert_non_null(strstr(err, "not a database"));
	assert_int_equal(jc__index_open(f->path, 0, &f->ix, err, sizeof(err)), 0);
	expect_fresh(f, "index.sqlite.old-1");
	/* The bad file is kept, byte for byte, for inspection. */
	snprintf(old, sizeof(old), "%s/index.sqlite.old-1", f->dir);
	{
		uint8_t back[sizeof(junk)];

		fd = open(old, O_RDONLY);
		assert_int_equal(read(fd, back, sizeof(back)), sizeof(back));
		close(fd);
		assert_memory_equal(back, junk, sizeof(junk));
	}
}

static void test_readonly_and_two_handles(void **state)
{
	struct fx *f = *state;
	struct jc_entry e = mkentry(5, 0, 1), g = {0};
	struct jc_index *ro;
	char err[256], missing[160];

	snprintf(missing, sizeof(missing), "%s/nope.sqlite", f->dir);
	assert_int_equal(jc__index_open(missing, 1, &ro, err, sizeof(err)), JC_ENOTFOUND);
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), 0);
	assert_int_equal(jc__index_get(ro, e.key, &g), JC_ENOTFOUND);
	put_ok(f, &e); /* the writer's commit is seen by the reader */
	assert_int_equal(jc__index_get(ro, e.key, &g), 0);
	assert_int_equal(g.size, e.size);
	jc__entry_clear(&g);
	assert_int_equal(jc__index_put(ro, &e), JC_EIO);
	assert_non_null(strstr(jc__index_errmsg(ro), "readonly"));
	jc__index_close(ro);
	jc__index_close(NULL);
}

/* Enough rows to leave the toy regime; the 1M figure is for the benchmark. */
static void test_many(void **state)
{
	struct fx *f = *state;
	enum { N = 20000 };
	uint8_t(*keys)[16] = malloc(sizeof(*keys) * N);
	uint64_t n, bytes, want = 0;
	struct walk w;
	struct jc_filter flt = {.accessed_before = 100};

	assert_non_null(keys);
	for (int i = 0; i < N; i++) {
		struct jc_entry e = mkentry(i, 0, 1000 - i % 1000);

		put_ok(f, &e);
		mkkey(keys[i], i);
		want += e.size;
	}
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, NULL, NULL, N, 5000),
			 0);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, &bytes), 0);
	assert_int_equal(n, N);
	assert_int_equal(bytes, want);
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 0);
	free(keys);
}

/* --- who used an entry (schema 2) ------------------------------------------ */

static void expect_user(struct fx *f, uint32_t uid, uint64_t entries, uint64_t negative,
			uint64_t bytes, uint64_t hits)
{
	struct jc_user_totals t;

	assert_int_equal(jc__index_user_totals(f->ix, uid, &t), 0);
	assert_int_equal(t.uid, uid);
	assert_int_equal(t.entries, entries);
	assert_int_equal(t.negative, negative);
	assert_int_equal(t.bytes, bytes);
	assert_int_equal(t.hits, hits);
}

static int count_cb(const struct jc_user_totals *t, void *ctx)
{
	(void)t;
	(*(int *)ctx)++;
	return 0;
}

static void test_users(void **state)
{
	struct fx *f = *state;
	struct jc_entry a = mkentry(1, 0, 100), b = mkentry(2, 0, 100), n = mkentry(3, 1, 100);
	struct jc_entry g = {0};
	uint8_t keys[2][16];
	uint32_t hits[2] = {3, 1}, uids[2] = {1001, 1002}, who[4];
	uint64_t left, count;
	int users = 0;

	assert_int_equal(jc__index_put_user(f->ix, &a, 1001), 0);
	assert_int_equal(jc__index_put_user(f->ix, &b, 1002), 0);
	assert_int_equal(jc__index_put_user(f->ix, &n, 1001), 0);
	expect_user(f, 1001, 2, 1, a.size, 0);
	expect_user(f, 1002, 1, 0, b.size, 0);
	expect_user(f, 7, 0, 0, 0, 0);
	/* 1002 is served a: shared, charged in full to both */
	memcpy(keys[0], a.key, 16);
	memcpy(keys[1], a.key, 16);
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, hits, uids, 2, 500), 0);
	expect_user(f, 1001, 2, 1, a.size, 3);
	expect_user(f, 1002, 2, 0, a.size + b.size, 1);
	count = 4;
	assert_int_equal(jc__index_users_of(f->ix, a.key, who, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(who[0], 1001);
	assert_int_equal(who[1], 1002);
	/* one uid's view: its own hits and access time; another's key is absent */
	assert_int_equal(jc__index_get_user(f->ix, a.key, 1002, &g), 0);
	assert_int_equal(g.hits, 1);
	assert_int_equal(g.last_access, 500);
	jc__entry_clear(&g);
	assert_int_equal(jc__index_get_user(f->ix, b.key, 1001, &g), JC_ENOTFOUND);
	struct jc_filter flt = {.by_uid = 1, .uid = 1001};
	struct walk w = {0};
	assert_int_equal(walk(f, &flt, &w), 0);
	assert_int_equal(w.n, 2);
	/* a replaced row (same key, new size) moves every user's bytes */
	a.size += 50;
	assert_int_equal(jc__index_put(f->ix, &a), 0);
	expect_user(f, 1001, 2, 1, a.size, 3);
	expect_user(f, 1002, 2, 0, a.size + b.size, 1);
	/* unuse: the entry stays while another uses it */
	assert_int_equal(jc__index_unuse(f->ix, a.key, 1001, &left), 0);
	assert_int_equal(left, 1);
	expect_user(f, 1001, 1, 1, 0, 0);
	/* deleting a row takes its users with it */
	assert_int_equal(jc__index_delete(f->ix, a.key), 0);
	expect_user(f, 1002, 1, 0, b.size, 0);
	assert_int_equal(jc__index_delete(f->ix, n.key), 0);
	expect_user(f, 1001, 0, 0, 0, 0);
	assert_int_equal(jc__index_foreach_user_totals(f->ix, count_cb, &users), 0);
	assert_int_equal(users, 1); /* a uid with nothing left is not listed */
	/* touching a key that is gone records nothing */
	assert_int_equal(jc__index_touch(f->ix, (const uint8_t(*)[16])keys, hits, uids, 1, 600), 0);
	expect_user(f, 1001, 0, 0, 0, 0);
}

/* What schema 3 did not have (kept requests, meta). */
#define SCHEMA_4_DROP                                                                              \
	"DROP TRIGGER entries_del_request; DROP TRIGGER entries_upd_request;"                      \
	" DROP TRIGGER requests_ins; DROP TRIGGER requests_del; DROP TABLE requests;"              \
	" DROP TABLE meta; ALTER TABLE entries DROP COLUMN request;"                               \
	" ALTER TABLE totals DROP COLUMN requests; ALTER TABLE totals DROP COLUMN request_bytes;"
#define DROP_ALL_TRIGGERS                                                                          \
	"DROP TRIGGER entries_ins; DROP TRIGGER entries_del; DROP TRIGGER entries_upd;"            \
	" DROP TRIGGER users_ins; DROP TRIGGER users_del; DROP TRIGGER users_upd;"                 \
	" DROP TRIGGER entries_del_users; DROP TRIGGER entries_upd_users;"

/* An index of schema 1 (before users) is upgraded in place: every entry
 * kept, each the index file's owner's. */
static void test_upgrade_from_schema_1(void **state)
{
	struct fx *f = *state;
	struct jc_entry e1 = mkentry(1, 0, 100), e2 = mkentry(2, 1, 200), g = {0};
	struct stat st;
	uint64_t n = 0;

	put_ok(f, &e1);
	put_ok(f, &e2);
	jc__index_close(f->ix);
	f->ix = NULL;
	/* what schema 1 was: these tables, columns and triggers absent */
	sql(f->path, SCHEMA_4_DROP DROP_ALL_TRIGGERS
	    " DROP TABLE users; DROP TABLE user_totals;"
	    " ALTER TABLE totals DROP COLUMN stored; PRAGMA user_version = 1");
	assert_int_equal(stat(f->path, &st), 0);
	reopen(f);
	assert_int_equal(jc__index_totals(f->ix, &n, NULL, NULL), 0);
	assert_int_equal(n, 2);
	assert_int_equal(jc__index_get(f->ix, e1.key, &g), 0);
	jc__entry_clear(&g);
	assert_int_equal(jc__index_get_user(f->ix, e2.key, (uint32_t)st.st_uid, &g), 0);
	assert_int_equal(g.last_access, 200);
	jc__entry_clear(&g);
	expect_user(f, (uint32_t)st.st_uid, 2, 1, e1.size, 0);
	/* and it is schema 2 now: opened again as is, read-only too */
	struct jc_index *ro;
	char err[256];
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), 0);
	jc__index_close(ro);
	reopen(f);
	expect_user(f, (uint32_t)st.st_uid, 2, 1, e1.size, 0);
}

static int kept_cb(const struct jc_kept *k, void *ctx)
{
	uint8_t(*order)[16] = ctx;
	size_t i = 0;
	while (order[i][0])
		i++;
	memcpy(order[i], k->key, 16);
	return 0;
}

/* Kept requests: one per entry, the first stays; a request shared by
 * entries is one row, counted once in the budget, and goes with the last
 * entry that names it; a request no entry takes is not kept; other bytes
 * with the same hash (a collision) are a request of their own; the walk is
 * by value (hits over age) and filters. */
static void test_kept_requests(void **state)
{
	struct fx *f = *state;
	struct jc_entry e1 = mkentry(1, 0, 100000), e2 = mkentry(2, 0, 100000),
			e3 = mkentry(3, 1, 100000 - 90 * 86400);
	uint8_t order[4][16] = {{0}};
	static const char a[300] = "request a", b[70] = "request b";
	uint64_t n = 0, bytes = 0, entry_bytes = 0;
	struct jc_kept k;

	e2.versions = (char *)"v2";
	e2.hits = 5;
	e3.hits = 50; /* more hits, 90 days older: 51 / 91 < 1 / 1 */
	put_ok(f, &e1);
	put_ok(f, &e2);
	put_ok(f, &e3);
	assert_int_equal(jc__index_stored(f->ix, &entry_bytes), 0);
	/* no entry: nothing kept */
	uint8_t none[16];
	mkkey(none, 99);
	assert_int_equal(jc__index_keep_request(f->ix, none, 11, 1000, a, sizeof(a)), 0);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 0);
	assert_int_equal(jc__index_keep_request(f->ix, e1.key, 11, 1000, a, sizeof(a)), 0);
	assert_int_equal(jc__index_keep_request(f->ix, e1.key, 11, 1001, b, sizeof(b)),
			 0); /* first stays */
	assert_int_equal(jc__index_keep_request(f->ix, e2.key, 11, 1001, a, sizeof(a)),
			 0); /* shared */
	/* same hash, other bytes: a request of its own */
	assert_int_equal(jc__index_keep_request(f->ix, e3.key, 11, 1002, b, sizeof(b)), 0);
	struct jc_kept k1, k2, k3;
	assert_int_equal(jc__index_get_request(f->ix, e1.key, &k1), 0);
	assert_int_equal(jc__index_get_request(f->ix, e2.key, &k2), 0);
	assert_int_equal(jc__index_get_request(f->ix, e3.key, &k3), 0);
	assert_int_equal(k1.id, k2.id);
	assert_int_not_equal(k1.id, k3.id);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 370);
	assert_int_equal(jc__index_stored(f->ix, &bytes), 0);
	assert_int_equal(bytes, entry_bytes + 370); /* the budget counts them */
	assert_int_equal(jc__index_get_request(f->ix, e1.key, &k), 0);
	assert_int_equal(k.size, 300);
	assert_int_equal(k.uid, 1000);
	assert_int_equal(jc__index_get_request(f->ix, none, &k), JC_ENOTFOUND);
	uint8_t *data;
	size_t len;
	assert_int_equal(jc__index_request_data(f->ix, k3.id, &data, &len), 0);
	assert_int_equal(len, sizeof(b));
	assert_memory_equal(data, b, sizeof(b));
	free(data);

	/* value order: e2 (5 hits, now), e1 (0, now), e3 (50, 90 days old) */
	struct jc_kept_filter kf = {.now = 100000};
	assert_int_equal(jc__index_foreach_request(f->ix, &kf, kept_cb, order), 0);
	assert_memory_equal(order[0], e2.key, 16);
	assert_memory_equal(order[1], e1.key, 16);
	assert_memory_equal(order[2], e3.key, 16);
	/* of another identity than v2, and not made for v2 yet: e1 shares its
	 * request with e2 (already made for v2), so only e3 */
	memset(order, 0, sizeof(order));
	kf.versions_not = "v2";
	assert_int_equal(jc__index_foreach_request(f->ix, &kf, kept_cb, order), 0);
	assert_memory_equal(order[0], e3.key, 16);
	assert_int_equal(order[1][0], 0);
	memset(order, 0, sizeof(order));
	kf = (struct jc_kept_filter){.now = 100000, .top = 1};
	assert_int_equal(jc__index_foreach_request(f->ix, &kf, kept_cb, order), 0);
	assert_int_equal(order[1][0], 0);
	/* by uid: the requests the uid made, not those of entries it only uses
	 * (they name another uid's files) */
	assert_int_equal(jc__index_put_user(f->ix, &e3, 4242), 0);
	memset(order, 0, sizeof(order));
	kf = (struct jc_kept_filter){.now = 100000, .by_uid = 1, .uid = 4242};
	assert_int_equal(jc__index_foreach_request(f->ix, &kf, kept_cb, order), 0);
	assert_int_equal(order[0][0], 0);
	kf.uid = 1002;
	assert_int_equal(jc__index_foreach_request(f->ix, &kf, kept_cb, order), 0);
	assert_memory_equal(order[0], e3.key, 16);
	assert_int_equal(order[1][0], 0);

	/* a put of the same key (a new compile) keeps its request */
	put_ok(f, &e1);
	assert_int_equal(jc__index_get_request(f->ix, e1.key, &k), 0);
	/* requests go with the last entry that names them */
	assert_int_equal(jc__index_delete(f->ix, e1.key), 0);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 370);
	assert_int_equal(jc__index_delete(f->ix, e2.key), 0);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 70);
	assert_int_equal(jc__index_request_data(f->ix, k1.id, &data, &len), JC_ENOTFOUND);
	/* found by content after a reopen too (the map is built from the
	 * table), and a removed request's bytes make a row of their own */
	reopen(f);
	struct jc_entry e4 = mkentry(4, 0, 100000), e5 = mkentry(5, 0, 100000);
	put_ok(f, &e4);
	put_ok(f, &e5);
	assert_int_equal(jc__index_keep_request(f->ix, e4.key, 11, 1003, b, sizeof(b)), 0);
	assert_int_equal(jc__index_keep_request(f->ix, e5.key, 11, 1003, a, sizeof(a)), 0);
	struct jc_kept k4, k5;
	assert_int_equal(jc__index_get_request(f->ix, e4.key, &k4), 0);
	assert_int_equal(jc__index_get_request(f->ix, e5.key, &k5), 0);
	assert_int_equal(k4.id, k3.id);
	assert_int_not_equal(k5.id, k3.id);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 370);
	/* ... and no index on the hash: the map is the only way in */
	assert_int_equal(pragma_of(f->path, "SELECT count(*) FROM sqlite_master WHERE tbl_name ="
					    " 'requests' AND type = 'index'"),
			 0);

	/* meta */
	char v[64];
	assert_int_equal(jc__index_meta_get(f->ix, JC_META_IDENTITY, v, sizeof(v)), JC_ENOTFOUND);
	assert_int_equal(jc__index_meta_set(f->ix, JC_META_IDENTITY, "nvrtc=x"), 0);
	assert_int_equal(jc__index_meta_set(f->ix, JC_META_IDENTITY, "nvrtc=y"), 0);
	assert_int_equal(jc__index_meta_get(f->ix, JC_META_IDENTITY, v, sizeof(v)), 0);
	assert_string_equal(v, "nvrtc=y");
}

/* An index of schema 2 (before kept requests) is upgraded in place: its
 * entries stay, with no request; requests can be kept from then on. */
static void test_upgrade_from_schema_3(void **state)
{
	struct fx *f = *state;
	struct jc_entry e1 = mkentry(1, 0, 100), g = {0};
	uint64_t n = 9, bytes = 9;
	struct jc_kept k;

	put_ok(f, &e1);
	jc__index_close(f->ix);
	f->ix = NULL;
	sql(f->path, SCHEMA_4_DROP "PRAGMA user_version = 3");
	/* read-only, it is refused (and says an upgrade keeps the entries) */
	struct jc_index *ro;
	char err[256];
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), JC_EVERSION);
	assert_non_null(strstr(err, "upgrades it in place"));
	reopen(f);
	assert_int_equal(jc__index_get(f->ix, e1.key, &g), 0);
	jc__entry_clear(&g);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 0);
	assert_int_equal(bytes, 0);
	assert_int_equal(jc__index_get_request(f->ix, e1.key, &k), JC_ENOTFOUND);
	static const char req[42] = "a request";
	assert_int_equal(jc__index_keep_request(f->ix, e1.key, 5, 7, req, sizeof(req)), 0);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(bytes, 42);
	assert_int_equal(jc__index_open(f->path, 1, &ro, err, sizeof(err)), 0);
	jc__index_close(ro);
	/* schema 4 had an index on the requests' hash: 4 -> 5 drops it, and
	 * the same bytes still share their row */
	jc__index_close(f->ix);
	f->ix = NULL;
	sql(f->path, "CREATE INDEX requests_hash ON requests(hash); PRAGMA user_version = 4");
	reopen(f);
	assert_int_equal(pragma_of(f->path, "PRAGMA user_version"), 5);
	assert_int_equal(pragma_of(f->path, "SELECT count(*) FROM sqlite_master WHERE name ="
					    " 'requests_hash'"),
			 0);
	struct jc_entry e2 = mkentry(2, 0, 100);
	put_ok(f, &e2);
	assert_int_equal(jc__index_keep_request(f->ix, e2.key, 5, 7, req, sizeof(req)), 0);
	assert_int_equal(jc__index_request_totals(f->ix, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 42);
}

static int charge_cb(const struct jc_entry *e, void *ctx)
{
	*(uint64_t *)ctx += e->charge;
	return 0;
}

/* pragma's one integer from the file at path. */
static int64_t pragma_of(const char *path, const char *pragma)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, pragma, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* Schema 3: the stored bytes are the charges of every entry, ok or failed,
 * a failure's log included, globally and per uid; an index of schema 2 is
 * upgraded in place to them, into auto_vacuum incremental; removals give
 * the pages back (jc__index_reclaim). */
static void test_charges_and_upgrade_from_schema_2(void **state)
{
	struct fx *f = *state;
	struct jc_entry ok = mkentry(1, 0, 100), bad = mkentry(2, 1, 200);
	static char big_log[200000];
	memset(big_log, 'w', sizeof(big_log) - 1);
	bad.log = big_log;
	assert_int_equal(jc__index_put_user(f->ix, &ok, 1001), 0);
	assert_int_equal(jc__index_put_user(f->ix, &bad, 1001), 0);
	uint64_t stored = 0, sum = 0;
	assert_int_equal(jc__index_stored(f->ix, &stored), 0);
	assert_int_equal(jc__index_foreach(f->ix, NULL, charge_cb, &sum), 0);
	assert_int_equal(stored, sum);
	/* the failure's log counts; the artifact in whole blocks */
	assert_true(stored >= sizeof(big_log) - 1 + 4096);
	struct jc_user_totals t;
	assert_int_equal(jc__index_user_totals(f->ix, 1001, &t), 0);
	assert_int_equal(t.stored, stored);
	assert_int_equal(pragma_of(f->path, "PRAGMA auto_vacuum"), 2);

	/* what schema 2 was: no stored columns, no incremental vacuum */
	jc__index_close(f->ix);
	f->ix = NULL;
	sql(f->path, SCHEMA_4_DROP DROP_ALL_TRIGGERS
	    " ALTER TABLE totals DROP COLUMN stored;"
	    " ALTER TABLE user_totals DROP COLUMN stored; PRAGMA auto_vacuum = NONE; VACUUM;"
	    " PRAGMA user_version = 2");
	assert_int_equal(pragma_of(f->path, "PRAGMA auto_vacuum"), 0);
	reopen(f);
	assert_int_equal(pragma_of(f->path, "PRAGMA user_version"), 5);
	assert_int_equal(pragma_of(f->path, "PRAGMA auto_vacuum"), 2);
	uint64_t again = 0;
	assert_int_equal(jc__index_stored(f->ix, &again), 0);
	assert_int_equal(again, stored);
	assert_int_equal(jc__index_user_totals(f->ix, 1001, &t), 0);
	assert_int_equal(t.stored, stored);
	/* the triggers are schema 3's: a removal takes its charge */
	assert_int_equal(jc__index_delete(f->ix, bad.key), 0);
	assert_int_equal(jc__index_stored(f->ix, &again), 0);
	sum = 0;
	assert_int_equal(jc__index_foreach(f->ix, NULL, charge_cb, &sum), 0);
	assert_int_equal(again, sum);
	/* and its pages go back to the file system */
	int64_t pages = pragma_of(f->path, "PRAGMA page_count");
	assert_int_equal(jc__index_reclaim(f->ix), 0);
	jc__index_close(f->ix);
	f->ix = NULL;
	int64_t after = pragma_of(f->path, "PRAGMA page_count");
	printf("a 200 kB log's pages: %lld pages before the reclaim, %lld after\n",
	       (long long)pages, (long long)after);
	assert_true(after < pages - 40);
	reopen(f);
}

/* A budget applied cuts the WAL back to its size at once, not at some
 * write after the WAL next fills to a checkpoint: a new index's schema (19 pages
 * at schema 4) is more than the WAL of a 1 MiB budget (16 pages,
 * jc__index_wal_pages), and a WAL left above it would shrink at some later
 * write, below what the empty cache directory was measured to hold besides
 * its entries (tests/ops/test_budget.c). */
static void test_budget_cuts_wal(void **state)
{
	struct fx *f = *state;
	char wal[160];
	struct stat st;
	int64_t limit = (int64_t)jc__index_wal_pages(1 << 20) * 4096;
	snprintf(wal, sizeof(wal), "%s-wal", f->path);
	assert_int_equal(stat(wal, &st), 0);
	printf("a new index's WAL: %lld bytes, a 1 MiB budget's: %lld\n", (long long)st.st_size,
	       (long long)limit);
	assert_true(st.st_size > limit); /* else this test shows nothing */
	assert_int_equal(jc__index_set_budget(f->ix, 1 << 20), 0);
	struct jc_entry e1 = mkentry(1, 0, 100);
	put_ok(f, &e1);
	assert_int_equal(stat(wal, &st), 0);
	assert_true(st.st_size <= limit);
	/* its room: the budget's WAL (header and frames), in whole blocks */
	assert_true((int64_t)st.st_blocks * 512 <= limit + 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_round_trip),
	    T(test_replace_delete),
	    T(test_touch),
	    T(test_foreach),
	    T(test_totals_refs),
	    T(test_put_many),
	    T(test_counters),
	    T(test_future_version),
	    T(test_corrupt_file),
	    T(test_readonly_and_two_handles),
	    T(test_many),
	    T(test_users),
	    T(test_upgrade_from_schema_1),
	    T(test_charges_and_upgrade_from_schema_2),
	    T(test_kept_requests),
	    T(test_upgrade_from_schema_3),
	    T(test_budget_cuts_wal),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
