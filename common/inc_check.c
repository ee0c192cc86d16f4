/* SPDX-License-Identifier: MIT */
/* The re-checks of an include set (includes.h): jc__inc_check before a
 * lookup that the set keys (stat calls, hashes from the memo), and after a
 * compile jc__inc_unchanged (stat identities) and jc__inc_rehash (the
 * unsettled entries read again). */
#include "common/includes.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/inc_buf.h"
#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "jitcache/jitcache.h"

/*
 * Directories seen while re-checking ABSENT entries. A name whose lookup
 * fails with ENOENT lies under a missing directory or in an existing one:
 * its parents are looked at (once per directory: the set is sorted, so a
 * directory's names are mostly together), and every later name below the
 * topmost missing one is absent without a stat, since resolving it would
 * fail there. CUB's probes next to a source (cub/..., cuda/..., hundreds of
 * names under a few missing directories) cost a few stat calls, not one
 * each.
 */
struct absent_dirs {
	char gone[PATH_MAX];  /* the topmost missing directory found; "" none */
	char there[PATH_MAX]; /* the last parent found to exist; "" none */
};

/* 1 when path lies below dir ("" never). */
static int below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return n && strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* path, which stat() did not find (ENOENT): records its missing parents. */
static void absent_walk(struct absent_dirs *a, const char *path, uint64_t *n_stat)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	for (char *slash = strrchr(dir, '/'); slash && slash > dir; slash = strrchr(dir, '/')) {
		*slash = 0;
		if (strcmp(dir, a->there) == 0)
			return;
		struct stat st;
		(*n_stat)++;
		if (stat(dir, &st) == 0 || errno != ENOENT) {
			snprintf(a->there, sizeof(a->there), "%s", dir);
			return;
		}
		memcpy(a->gone, dir, strlen(dir) + 1);
	}
}

int jc__inc_check(struct jc_inc_set *set, const struct jc_inc_ctx *ctx)
{
	int64_t now = jc__inc_now_ns();
	struct absent_dirs absent = {"", ""};
	set->unsettled = 0;
	set->checked_ns = now;
	for (size_t i = 0; i < set->n; i++) {
		struct jc_inc_entry *e = &set->v[i];
		struct stat st;
		uint8_t hash[16];
		int exists;
		if (e->kind == JC_INC_TOOLKIT) {
			if (!jc__inc_in_toolkit(ctx->toolkit_root, e->path))
				return 0;
			continue;
		}
		if (e->kind == JC_INC_LINK) {
			int same = jc__inc_link_same(e);
			if (same != 1)
				return same;
			continue;
		}
		if (e->kind == JC_INC_ABSENT && below(e->path, absent.gone))
			continue;
		set->n_stat++;
		exists = stat(e->path, &st) == 0;
		if (e->kind == JC_INC_ABSENT) {
			if (exists && S_ISREG(st.st_mode))
				return 0;
			if (!exists && errno == ENOENT)
				absent_walk(&absent, e->path, &set->n_stat);
			continue;
		}
		if (e->kind == JC_INC_DIR) {
			if (!exists || !S_ISDIR(st.st_mode)) {
				if (memcmp(e->hash, jc__inc_not_a_dir, 16) != 0)
					return 0;
				continue;
			}
			jc__inc_stat_of(&st, &e->st);
			if (jc__inc_dir_hash(ctx->memo, e->path, &e->st, now, hash) != 0 ||
			    memcmp(hash, e->hash, 16) != 0)
				return 0;
			if (jc__inc_unsettled(&e->st, now))
				jc__inc_mark_unsettled(set, e->path);
			continue;
		}
		if (!exists || !S_ISREG(st.st_mode))
			return 0;
		jc__inc_stat_of(&st, &e->st);
		int rc = jc__inc_file_info(ctx->memo, ctx->max_file_size, set, e->path, &e->st,
					   hash, NULL, now, NULL, 0);
		if (rc == JC_ENOMEM)
			return rc;
		if (rc != 0 || memcmp(hash, e->hash, 16) != 0)
			return 0;
	}
	return 1;
}

int jc__inc_unchanged(const struct jc_inc_set *set, char *what, size_t len)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		struct stat st;
		struct jc_inc_stat id;
		if (e->kind == JC_INC_TOOLKIT)
			continue;
		if (e->kind == JC_INC_LINK) {
			if (jc__inc_link_same(e) != 1) {
				snprintf(what, len, "%s", e->path);
				return 0;
			}
			continue;
		}
		int exists = stat(e->path, &st) == 0, same;
		if (e->kind == JC_INC_ABSENT) {
			same = !exists || !S_ISREG(st.st_mode);
		} else if (e->kind == JC_INC_DIR && memcmp(e->hash, jc__inc_not_a_dir, 16) == 0) {
			same = !exists || !S_ISDIR(st.st_mode);
		} else {
			same = exists &&
			       (e->kind == JC_INC_DIR ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
			if (same) {
				jc__inc_stat_of(&st, &id);
				same = jc__inc_same_stat(&id, &e->st);
			}
		}
		if (!same) {
			snprintf(what, len, "%s", e->path);
			return 0;
		}
	}
	return 1;
}

int jc__inc_rehash(const struct jc_inc_set *set, const struct jc_inc_ctx *ctx, char *what,
		   size_t len)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		if ((e->kind != JC_INC_FILE && e->kind != JC_INC_DIR) ||
		    !jc__inc_unsettled(&e->st, set->checked_ns))
			continue;
		struct jc_inc_stat a, b;
		uint8_t hash[16];
		int same;
		if (e->kind == JC_INC_FILE) {
			struct jc_inc_buf data = {0};
			int rc =
			    jc__inc_read_file(e->path, ctx->max_file_size, &data, &a, &b, NULL, 0);
			if (rc == 0)
				rc = jc__inc_file_hash(e->path, data.p, data.n, NULL, hash);
			free(data.p);
			if (rc == JC_ENOMEM)
				return rc;
			same = rc == 0;
		} else {
			struct stat st;
			char **names;
			size_t n;
			same = stat(e->path, &st) == 0 && S_ISDIR(st.st_mode);
			if (same)
				jc__inc_stat_of(&st, &a);
			if (same && (same = jc__inc_list_dir(e->path, &names, &n, NULL, 0) == 0)) {
				int rc = jc__inc_names_hash(names, n, hash);
				jc__inc_free_names(names, n);
				if (rc)
					return rc;
				same = stat(e->path, &st) == 0;
				if (same)
					jc__inc_stat_of(&st, &b);
			}
		}
		if (!same || !jc__inc_same_stat(&a, &e->st) || !jc__inc_same_stat(&b, &e->st) ||
		    memcmp(hash, e->hash, 16)) {
			snprintf(what, len, "%s", e->path);
			return 0;
		}
	}
	return 1;
}
