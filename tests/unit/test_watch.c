/* SPDX-License-Identifier: MIT */
/*
 * The include tree watcher (common/watch.h) on real files and real inotify
 * in a mkdtemp tree: a header reached through a chain of symbolic links (a
 * relative link to a path through another link) stays valid while files the
 * tree does not use change, and becomes invalid when the link in the middle
 * of the chain is swapped, when the header is written, or when its
 * directory is renamed; an absent candidate's directory appearing
 * invalidates; a budget too small refuses; a forgotten stamp is not valid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/includes.h"
#include "common/watch.h"
#include "tests/lib/test.h"

static char root[JTL_ROOT_MAX];

/* Runs the shell command cmd in root; fails the test unless it succeeds. */
static void in_root(const char *cmd)
{
	assert_int_equal(jct_sh("cd %s && %s", root, cmd), 0);
}

static int setup(void **state)
{
	(void)state;
	jct_tmpdir(root, NULL, "watch");
	/* inc/x -> ../B/real, B -> A: inc/x/h.h is A/real/h.h */
	in_root("mkdir -p A/real C/real inc && echo '#define H 1' > A/real/h.h");
	in_root("echo '#define H 2' > C/real/h.h && ln -s A B && ln -s ../B/real inc/x");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	jct_tmpdir_remove(root);
	return 0;
}

/* A set of FILE root/inc/x/h.h and ABSENT root/inc/missing/y.h. */
static void make_set(struct jc_inc_set *set)
{
	char p[256];
	memset(set, 0, sizeof(*set));
	static const uint8_t hash[16] = {1};
	snprintf(p, sizeof(p), "%s/inc/x/h.h", root);
	assert_int_equal(jc__inc_set_add(set, p, strlen(p), JC_INC_FILE, hash), 0);
	snprintf(p, sizeof(p), "%s/inc/missing/y.h", root);
	assert_int_equal(jc__inc_set_add(set, p, strlen(p), JC_INC_ABSENT, NULL), 0);
	assert_int_equal(jc__inc_set_finish(set), 0);
}

static uint64_t watch(struct jc_watch *w, const struct jc_inc_set *set)
{
	int why = -1;
	uint64_t stamp = jc__watch_tree(w, set, &why);
	assert_int_equal(why, JC_WATCH_OK);
	assert_true(stamp != 0);
	assert_true(jc__watch_valid(w, stamp));
	return stamp;
}

static void test_link_chain(void **state)
{
	(void)state;
	struct jc_watch *w;
	struct jc_inc_set set;
	assert_int_equal(jc__watch_new(1000, &w, NULL, 0), 0);
	make_set(&set);
	uint64_t s = watch(w, &set);

	/* Not the tree's: a new file beside the header, another in inc/, one in C. */
	in_root("echo x > A/real/other.h && touch inc/unrelated && echo y > C/real/h.h");
	assert_true(jc__watch_valid(w, s));

	/* The link in the middle of the chain swapped (B -> C). */
	in_root("ln -sfn C B.new && mv -T B.new B");
	assert_false(jc__watch_valid(w, s));
	jc__watch_forget(w, s);

	/* Now through C: the header written. */
	s = watch(w, &set);
	in_root("echo '#define H 3' >> C/real/h.h");
	assert_false(jc__watch_valid(w, s));
	jc__watch_forget(w, s);

	/* Its directory renamed away. */
	s = watch(w, &set);
	in_root("mv C/real C/real-old");
	assert_false(jc__watch_valid(w, s));
	jc__watch_forget(w, s);
	in_root("mv C/real-old C/real");

	/* The absent candidate's directory made. */
	s = watch(w, &set);
	in_root("mkdir inc/missing");
	assert_false(jc__watch_valid(w, s));
	jc__watch_forget(w, s);

	struct jc_watch_stats st;
	jc__watch_stats(w, &st, 1);
	assert_int_equal(st.trees, 0);
	assert_int_equal(st.watches, 0); /* every watch went with its last tree */
	assert_true(st.invalidations >= 4);
	jc__inc_set_clear(&set);
	jc__watch_free(w);
}

static void test_budget_and_forget(void **state)
{
	(void)state;
	struct jc_watch *w;
	struct jc_inc_set set;
	int why;
	make_set(&set);
	assert_int_equal(jc__watch_new(3, &w, NULL, 0), 0);
	assert_int_equal(jc__watch_tree(w, &set, &why), 0);
	assert_int_equal(why, JC_WATCH_BUDGET);
	struct jc_watch_stats st;
	jc__watch_stats(w, &st, 0);
	assert_int_equal(st.watches, 0); /* a refused tree keeps nothing */
	jc__watch_free(w);

	assert_int_equal(jc__watch_new(1000, &w, NULL, 0), 0);
	uint64_t a = watch(w, &set), b = watch(w, &set);
	jc__watch_stats(w, &st, 0);
	assert_int_equal(st.trees, 2);
	uint64_t shared = st.watches; /* one watch per inode, however many trees */
	jc__watch_forget(w, a);
	assert_false(jc__watch_valid(w, a));
	assert_true(jc__watch_valid(w, b));
	jc__watch_stats(w, &st, 0);
	assert_int_equal(st.watches, shared);
	jc__watch_forget(w, b);
	jc__watch_stats(w, &st, 0);
	assert_int_equal(st.watches, 0);
	assert_int_equal(jc__watch_tree(NULL, &set, &why), 0);
	assert_int_equal(why, JC_WATCH_OFF);
	jc__inc_set_clear(&set);
	jc__watch_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_link_chain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_budget_and_forget, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
