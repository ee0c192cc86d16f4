/* SPDX-License-Identifier: MIT */
/*
 * The include scan and manifests on real files in a mkdtemp tree: which
 * directives count (comments, strings, raw strings, splices, conditionals,
 * __has_include and wrappers), resolution through the -I search path with
 * absent candidates, the computed-include fallback, the toolkit tree, the
 * memo and its settle margin, re-checks, and manifest variants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "common/inc_opts.h"
#include "common/includes.h"
#include "common/req.h"
#include "core/manifest.h"
#include "jitcache/jitcache.h"
#include "tests/lib/test.h"

struct fx {
	char root[JTL_ROOT_MAX];
	struct jc_inc_memo *memo;
	struct jc_inc_ctx ctx;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	jct_tmpdir(f->root, NULL, "inc");
	assert_int_equal(jc__inc_memo_new(1024, &f->memo), 0);
	f->ctx.memo = f->memo;
	f->ctx.max_entries = 100000;
	f->ctx.max_file_size = 1 << 20;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	jct_tmpdir_remove(f->root);
	jc__inc_memo_free(f->memo);
	free(f);
	return 0;
}

/* A compile request with source src and -I ROOT/dir for each dir (NULL-terminated). */
static void make_req(const struct fx *f, struct jc_req *r, const char *src, const char *const *dirs)
{
	memset(r, 0, sizeof(*r));
	r->job = JC_JOB_COMPILE;
	r->output = JC_OUTPUT_CUBIN;
	r->arch = strdup("sm_90");
	r->source_name = strdup("k.cu");
	r->source = (uint8_t *)strdup(src);
	r->source_size = strlen(src);
	for (size_t i = 0; dirs && dirs[i]; i++) {
		char opt[512];
		snprintf(opt, sizeof(opt), "-I%s/%s", f->root, dirs[i]);
		assert_int_equal(jc__strv_push(&r->options, opt), 0);
		assert_int_equal(jc__strv_push(&r->include_dirs, opt + 2), 0);
	}
}

static void scan(const struct fx *f, const struct jc_req *r, struct jc_inc_set *set)
{
	char err[512] = "";
	int rc = jc__inc_scan(r, &f->ctx, set, err, sizeof(err));
	if (rc)
		fail_msg("scan: %d %s", rc, err);
}

/* The kind of the entry for ROOT/rel, or 0 when the set has none. */
static int kind_of(const struct fx *f, const struct jc_inc_set *set, const char *rel)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->v[i].path, path) == 0)
			return set->v[i].kind;
	return 0;
}

/* The key's view of a tree: the same bytes under other directories agree;
 * a change, nested directories or a file outside them do not. */
static void key_digest_of(const struct fx *f, const char *src, const char *const *dirs,
			  uint8_t out[16])
{
	struct jc_req r;
	struct jc_inc_set set;
	make_req(f, &r, src, dirs);
	scan(f, &r, &set);
	assert_int_equal(jc__inc_key_digest(&set, &r.include_dirs, out), 0);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

static void test_key_digest(void **state)
{
	struct fx *f = *state;
	const char *src = "#include <a.h>\n#include \"sub/b.h\"\n";
	jct_put(f->root, "u1/inc/a.h", "#include \"c.h\"\n");
	jct_put(f->root, "u1/inc/c.h", "int c;\n");
	jct_put(f->root, "u1/other/sub/b.h", "int b;\n");
	jct_put(f->root, "u2/x/inc/a.h", "#include \"c.h\"\n");
	jct_put(f->root, "u2/x/inc/c.h", "int c;\n");
	jct_put(f->root, "u2/y/sub/b.h", "int b;\n");
	jct_settle();
	uint8_t d1[16], d2[16], d3[16], d4[16];
	key_digest_of(f, src, (const char *const[]){"u1/inc", "u1/other", NULL}, d1);
	key_digest_of(f, src, (const char *const[]){"u2/x/inc", "u2/y", NULL}, d2);
	assert_memory_equal(d1, d2, 16);
	/* the order of the directories is part of the search */
	key_digest_of(f, src, (const char *const[]){"u2/y", "u2/x/inc", NULL}, d3);
	assert_memory_not_equal(d1, d3, 16);
	jct_put(f->root, "u2/x/inc/c.h", "int c2;\n");
	jct_settle();
	key_digest_of(f, src, (const char *const[]){"u2/x/inc", "u2/y", NULL}, d3);
	assert_memory_not_equal(d1, d3, 16);
	/* nested directories: the same tree under other top directories agrees */
	jct_put(f->root, "n1/inc/a.h", "#include \"c.h\"\n");
	jct_put(f->root, "n1/inc/c.h", "int c;\n");
	jct_put(f->root, "n1/sub/b.h", "int b;\n");
	jct_put(f->root, "n2/deep/inc/a.h", "#include \"c.h\"\n");
	jct_put(f->root, "n2/deep/inc/c.h", "int c;\n");
	jct_put(f->root, "n2/deep/sub/b.h", "int b;\n");
	jct_settle();
	key_digest_of(f, src, (const char *const[]){"n1", "n1/inc", NULL}, d3);
	key_digest_of(f, src, (const char *const[]){"n2/deep", "n2/deep/inc", NULL}, d4);
	assert_memory_equal(d3, d4, 16);
	/* a trailing slash is the same directory; another nesting is not */
	key_digest_of(f, src, (const char *const[]){"n1", "n1/inc/", NULL}, d4);
	assert_memory_equal(d3, d4, 16);
	key_digest_of(f, src, (const char *const[]){"u1", "u1/inc", NULL}, d4);
	assert_memory_not_equal(d3, d4, 16);
	/* a file outside the directories: its path is the key */
	char abs_src[600];
	snprintf(abs_src, sizeof(abs_src), "#include \"%s/u1/inc/c.h\"\n", f->root);
	key_digest_of(f, abs_src, (const char *const[]){"u1/inc", NULL}, d3);
	key_digest_of(f, abs_src, (const char *const[]){"u2/x/inc", NULL}, d4);
	assert_memory_not_equal(d3, d4, 16);
	size_t dir;
	char rel[64];
	struct jc_strv dirs = {(char *[]){"/a/b/", "/c", "/a/b/x", "/c/"}, 4};
	struct jc_inc_tops *t;
	assert_int_equal(jc__inc_tops_new(&dirs, &t), 0);
	assert_int_equal(jc__inc_tops_is_top(t, 0), 1);
	assert_int_equal(jc__inc_tops_is_top(t, 1), 1);
	assert_int_equal(jc__inc_tops_is_top(t, 2), 0);
	assert_int_equal(jc__inc_tops_is_top(t, 3), 0); /* equal to an earlier one */
	assert_int_equal(jc__inc_tops_rel(t, "/a/b/x/y.h", &dir, rel, sizeof(rel)), 1);
	assert_int_equal(dir, 0);
	assert_string_equal(rel, "x/y.h");
	assert_int_equal(jc__inc_tops_rel(t, "/c//./y.h", &dir, rel, sizeof(rel)), 1);
	assert_int_equal(dir, 1);
	assert_string_equal(rel, "y.h");
	assert_int_equal(jc__inc_tops_rel(t, "/c/../y.h", &dir, rel, sizeof(rel)), 0);
	assert_int_equal(jc__inc_tops_rel(t, "/cc/y.h", &dir, rel, sizeof(rel)), 0);
	jc__inc_tops_free(t);
}

static void test_directives(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", NULL};
	static const char src[] =
	    "// #include \"no_line_comment.h\"\n"
	    "/* #include \"no_block_comment.h\" */\n"
	    "const char *s = \"#include \\\"no_string.h\\\"\";\n"
	    "const char *r = R\"x(\n#include \"no_raw.h\"\n)x\";\n"
	    "int n = 1'000; char c = '#';\n"
	    "#if 0\n#include \"dead_branch.h\"\n#endif\n"
	    "  /* leading comment */ # include <angle.h>\n"
	    "#inc\\\nlude \"spliced.h\"\n"
	    "#if __has_include(<has.h>) && _CCCL_HAS_INCLUDE(<wrapped.h>)\n#endif\n"
	    "#define HAS_D __has_include(\"defined.h\")\n"
	    "#include_next <next.h>\n"
	    "#pragma message(\"not_a_header.h\")\n"
	    "x = 1; #include \"not_at_line_start.h\"\n";
	jct_put(f->root, "inc/angle.h", "#include \"sub/nested.h\"\n");
	jct_put(f->root, "inc/sub/nested.h", "#include \"sibling.h\"\n#include <deep/x.h>\n");
	jct_put(f->root, "inc/sub/sibling.h", "");
	jct_put(f->root, "inc/deep/x.h", "");
	jct_put(f->root, "inc/no_line_comment.h", "");
	/* A quoted name is looked up beside the including file, then on -I; an
	 * angle name (deep/x.h) on -I only. */
	struct jc_req r;
	struct jc_inc_set set;
	make_req(f, &r, src, dirs);
	scan(f, &r, &set);
	static const char *const absent[] = {
	    "inc/dead_branch.h", "inc/spliced.h", "inc/has.h",	   "inc/wrapped.h",
	    "inc/defined.h",	 "inc/next.h",	  "inc/sibling.h", NULL};
	static const char *const files[] = {"inc/angle.h", "inc/sub/nested.h", "inc/sub/sibling.h",
					    "inc/deep/x.h", NULL};
	static const char *const none[] = {
	    "inc/no_line_comment.h", "inc/no_block_comment.h",	"inc/no_string.h",  "inc/no_raw.h",
	    "inc/not_a_header.h",    "inc/not_at_line_start.h", "inc/sub/deep/x.h", NULL};
	for (int i = 0; absent[i]; i++)
		if (kind_of(f, &set, absent[i]) != JC_INC_ABSENT)
			fail_msg("%s: kind %d, want absent", absent[i],
				 kind_of(f, &set, absent[i]));
	for (int i = 0; files[i]; i++)
		if (kind_of(f, &set, files[i]) != JC_INC_FILE)
			fail_msg("%s: kind %d, want file", files[i], kind_of(f, &set, files[i]));
	for (int i = 0; none[i]; i++)
		if (kind_of(f, &set, none[i]))
			fail_msg("%s should not be referenced", none[i]);
	assert_false(set.fallback);
	assert_int_equal(set.n, 11); /* exactly the files and absent candidates above */
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

static int check(const struct fx *f, struct jc_inc_set *set)
{
	int rc = jc__inc_check(set, &f->ctx);
	assert_true(rc == 0 || rc == 1);
	return rc;
}

static void path_of(const struct fx *f, const char *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", f->root, rel);
}

/* Every candidate on the search path counts: a file added earlier on it
 * (shadowing) changes the set; removing it again restores the old one. */
static void test_search_path_and_shadowing(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"d1", "d2", NULL};
	struct jc_req r;
	struct jc_inc_set a, b;
	char p[512];
	jct_put(f->root, "d2/x.h", "#define X 2\n");
	mkdir(strcat(strcpy(p, f->root), "/d1"), 0755);
	make_req(f, &r, "#include \"x.h\"\n", dirs);
	scan(f, &r, &a);
	assert_int_equal(kind_of(f, &a, "d1/x.h"), JC_INC_ABSENT);
	assert_int_equal(kind_of(f, &a, "d2/x.h"), JC_INC_FILE);
	assert_int_equal(check(f, &a), 1);

	jct_put(f->root, "d1/x.h", "#define X 1\n");
	assert_int_equal(check(f, &a), 0);
	scan(f, &r, &b);
	assert_int_equal(kind_of(f, &b, "d1/x.h"), JC_INC_FILE);
	assert_memory_not_equal(a.digest, b.digest, 16);

	path_of(f, "d1/x.h", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	assert_int_equal(check(f, &a), 1);
	assert_int_equal(check(f, &b), 0);
	jc__inc_set_clear(&a);
	jc__inc_set_clear(&b);
	jc__req_clear(&r);
}

/* Unchanged files cost stat calls only; a change of content is found, a
 * change of mtime alone is not a difference; fresh files are unsettled. */
static void test_memo_and_settle(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", NULL};
	struct jc_req r;
	struct jc_inc_set set, again;
	char p[512];
	jct_put(f->root, "inc/a.h", "#include \"b.h\"\n#include \"opt.h\"\n");
	jct_put(f->root, "inc/b.h", "#define B 1\n");
	make_req(f, &r, "#include <a.h>\n", dirs);
	scan(f, &r, &set);
	assert_true(set.unsettled); /* written a moment ago: not memoised */
	assert_int_equal(set.n_read, 2);
	jct_settle();
	scan(f, &r, &again);
	assert_false(again.unsettled);
	assert_int_equal(again.n_read, 2); /* the first scan could not memoise them */
	assert_memory_equal(set.digest, again.digest, 16);
	jc__inc_set_clear(&again);
	scan(f, &r, &again);
	assert_int_equal(again.n_read, 0); /* memo: stat only */
	jc__inc_set_clear(&again);
	set.n_read = set.n_stat = 0;
	assert_int_equal(check(f, &set), 1);
	assert_int_equal(set.n_read, 0);
	assert_true(set.n_stat >= 2);

	/* mtime-only change: read again, same hash, still a match, unsettled. */
	path_of(f, "inc/b.h", p, sizeof(p));
	struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, times, 0), 0);
	set.n_read = 0;
	assert_int_equal(check(f, &set), 1);
	assert_int_equal(set.n_read, 1);
	assert_true(set.unsettled);
	char what[512] = "";
	struct jc_inc_set snap;
	scan(f, &r, &snap);
	assert_int_equal(jc__inc_unchanged(&snap, what, sizeof(what)), 1);

	/* Same size, new bytes: a difference, and the snapshot sees the change. */
	jct_put(f->root, "inc/b.h", "#define B 2\n");
	assert_int_equal(check(f, &set), 0);
	assert_int_equal(jc__inc_unchanged(&snap, what, sizeof(what)), 0);
	assert_string_equal(what, p);
	jc__inc_set_clear(&snap);

	/* An absent candidate that appears breaks the snapshot too. */
	jct_settle();
	scan(f, &r, &snap);
	jct_put(f->root, "inc/unrelated.h", "");
	assert_int_equal(jc__inc_unchanged(&snap, what, sizeof(what)), 1); /* not a candidate */
	jct_put(f->root, "inc/opt.h", "");
	assert_int_equal(jc__inc_unchanged(&snap, what, sizeof(what)), 0);
	path_of(f, "inc/opt.h", p, sizeof(p));
	assert_string_equal(what, p);
	jc__inc_set_clear(&snap);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

/* #include MACRO: every file under the -I directories, and their listings. */
static void test_computed_fallback(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", "missing", NULL};
	struct jc_req r;
	struct jc_inc_set set;
	char p[512];
	jct_put(f->root, "inc/a.h", "");
	jct_put(f->root, "inc/sub/b.h", "#include \"../a.h\"\n");
	jct_put(f->root, "inc/sub/deeper/c.txt", "data");
	make_req(f, &r, "#define H \"a.h\"\n#include H\n", dirs);
	scan(f, &r, &set);
	assert_true(set.fallback);
	assert_int_equal(kind_of(f, &set, "inc/a.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc/sub/b.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc/sub/../a.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc/sub/deeper/c.txt"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc"), JC_INC_DIR);
	assert_int_equal(kind_of(f, &set, "inc/sub/deeper"), JC_INC_DIR);
	assert_int_equal(kind_of(f, &set, "missing"), JC_INC_DIR);
	assert_int_equal(check(f, &set), 1);

	jct_put(f->root, "inc/sub/deeper/c.txt", "DATA"); /* any file there counts */
	assert_int_equal(check(f, &set), 0);
	jct_put(f->root, "inc/sub/deeper/c.txt", "data");
	assert_int_equal(check(f, &set), 1);
	jct_put(f->root, "inc/sub/new.h", ""); /* a new file anywhere under the directory */
	assert_int_equal(check(f, &set), 0);
	path_of(f, "inc/sub/new.h", p, sizeof(p));
	unlink(p);
	assert_int_equal(check(f, &set), 1);
	path_of(f, "missing", p, sizeof(p)); /* a missing -I directory that appears */
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(check(f, &set), 0);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

/* -I directories inside the toolkit tree are covered by its identity. */
static void test_toolkit_tree(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"tk/include/cccl", "user", NULL};
	struct jc_req r;
	struct jc_inc_set set;
	char root[512], p[512];
	jct_put(f->root, "tk/include/cccl/t.h", "#include <deeper.h>\n");
	jct_put(f->root, "user/u.h", "");
	path_of(f, "tk/include", p, sizeof(p));
	assert_non_null(realpath(p, root));
	f->ctx.toolkit_root = root;
	make_req(f, &r, "#include <t.h>\n#include <u.h>\n", dirs);
	scan(f, &r, &set);
	assert_int_equal(kind_of(f, &set, "tk/include/cccl"), JC_INC_TOOLKIT);
	assert_int_equal(kind_of(f, &set, "tk/include/cccl/t.h"),
			 0); /* neither hashed nor scanned */
	assert_int_equal(kind_of(f, &set, "user/t.h"), JC_INC_ABSENT);
	assert_int_equal(kind_of(f, &set, "user/u.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "user/deeper.h"), 0);
	assert_int_equal(set.n, 3);
	assert_int_equal(check(f, &set), 1);
	f->ctx.toolkit_root = "/nonexistent/toolkit";
	assert_int_equal(check(f, &set), 0);
	f->ctx.toolkit_root = NULL;
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

/* Pre-includes and absolute includes are read too; option forms and errors. */
static void test_options_and_roots(void **state)
{
	struct fx *f = *state;
	struct jc_req r;
	struct jc_inc_set set;
	char opt[600], err[512];
	jct_put(f->root, "inc/pre.h", "#include \"from_pre.h\"\n");
	jct_put(f->root, "abs.h", "");
	make_req(f, &r, "int x;\n", NULL);
	assert_int_equal(jc__inc_needed(&r), 0);
	assert_int_equal(jc__strv_push(&r.options, "--include-path"), 0);
	snprintf(opt, sizeof(opt), "%s/inc", f->root);
	assert_int_equal(jc__strv_push(&r.options, opt), 0);
	assert_int_equal(jc__inc_path_parse(&r, NULL, err, sizeof(err)), JC_EINVAL);
	assert_non_null(strstr(err, "declared"));
	assert_int_equal(jc__strv_push(&r.include_dirs, opt), 0);
	assert_int_equal(jc__strv_push(&r.options, "-include"), 0);
	assert_int_equal(jc__strv_push(&r.options, "pre.h"), 0);
	struct jc_inc_path ip;
	assert_int_equal(jc__inc_path_parse(&r, &ip, err, sizeof(err)), 0);
	assert_int_equal(ip.n_dirs, 1);
	assert_string_equal(ip.dirs[0], opt);
	assert_int_equal(ip.n_pre, 1);
	assert_string_equal(ip.pre[0], "pre.h");
	jc__inc_path_clear(&ip);
	assert_int_equal(jc__inc_needed(&r), 1);
	scan(f, &r, &set);
	assert_int_equal(kind_of(f, &set, "inc/pre.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc/from_pre.h"), JC_INC_ABSENT);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);

	/* No -I at all, but an absolute include: the daemon must look. */
	snprintf(opt, sizeof(opt), "#include \"%s/abs.h\"\n", f->root);
	make_req(f, &r, opt, NULL);
	assert_int_equal(jc__inc_needed(&r), 1);
	scan(f, &r, &set);
	assert_int_equal(kind_of(f, &set, "abs.h"), JC_INC_FILE);
	assert_int_equal(set.n, 1);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);

	/* Other forms: -I DIR (two words), -I=DIR, --pre-include=NAME. */
	make_req(f, &r, "int x;\n", NULL);
	snprintf(opt, sizeof(opt), "%s/inc", f->root);
	static const char *const forms[][2] = {
	    {"-I", NULL}, {"-I=", NULL}, {"--pre-include=p.h", ""}};
	assert_int_equal(jc__strv_push(&r.options, forms[0][0]), 0);
	assert_int_equal(jc__strv_push(&r.options, opt), 0);
	char eq[600];
	snprintf(eq, sizeof(eq), "%s%s", forms[1][0], opt);
	assert_int_equal(jc__strv_push(&r.options, eq), 0);
	assert_int_equal(jc__strv_push(&r.options, forms[2][0]), 0);
	assert_int_equal(jc__strv_push(&r.include_dirs, opt), 0);
	assert_int_equal(jc__strv_push(&r.include_dirs, opt), 0);
	assert_int_equal(jc__inc_path_parse(&r, &ip, err, sizeof(err)), 0);
	assert_int_equal(ip.n_dirs, 2);
	assert_int_equal(ip.n_pre, 1);
	assert_string_equal(ip.pre[0], "p.h");
	jc__inc_path_clear(&ip);
	jc__req_clear(&r);
}

static void test_limits(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", NULL};
	struct jc_req r;
	struct jc_inc_set set;
	char err[512] = "";
	jct_put(f->root, "inc/big.h", "0123456789abcdef0123456789abcdef");
	make_req(f, &r, "#include <big.h>\n#include <a.h>\n#include <b.h>\n", dirs);
	f->ctx.max_file_size = 16;
	assert_int_equal(jc__inc_scan(&r, &f->ctx, &set, err, sizeof(err)), JC_ETOOBIG);
	assert_non_null(strstr(err, "big.h"));
	assert_int_equal(set.n, 0);
	f->ctx.max_file_size = 1 << 20;
	f->ctx.max_entries = 2;
	assert_int_equal(jc__inc_scan(&r, &f->ctx, &set, err, sizeof(err)), JC_ETOOBIG);
	jc__req_clear(&r);
}

/* Manifests: variants newest first, revert finds the older one, at most
 * JC_MANIFEST_VARIANTS kept, a damaged file is ignored and replaced. */
static void test_manifest(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", NULL};
	struct jc_manifests *m;
	struct jc_req r;
	struct jc_inc_set sets[JC_MANIFEST_VARIANTS + 1], got;
	uint8_t direct[16] = {0xab, 1, 2, 3};
	uint64_t n_stat;
	char cache[512], err[512] = "", text[64];
	path_of(f, "cache", cache, sizeof(cache));
	assert_int_equal(mkdir(cache, 0700), 0);
	assert_int_equal(jc__manifests_open(cache, 0700, &m, err, sizeof(err)), 0);
	make_req(f, &r, "#include <v.h>\n", dirs);
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 0);
	for (int i = 0; i <= JC_MANIFEST_VARIANTS; i++) {
		snprintf(text, sizeof(text), "#define V %d\n", i);
		jct_put(f->root, "inc/v.h", text);
		scan(f, &r, &sets[i]);
		assert_int_equal(jc__manifest_add(m, direct, &sets[i], err, sizeof(err)), 0);
		assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 1);
		assert_memory_equal(got.digest, sets[i].digest, 16);
		jc__inc_set_clear(&got);
	}
	/* Revert to version 1: an older variant matches (after trying newer ones). */
	jct_put(f->root, "inc/v.h", "#define V 1\n");
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 1);
	assert_memory_equal(got.digest, sets[1].digest, 16);
	assert_true(n_stat > got.n_stat);
	jc__inc_set_clear(&got);
	/* Version 0 was the ninth back: dropped. */
	jct_put(f->root, "inc/v.h", "#define V 0\n");
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 0);
	/* Adding a variant that is there already moves it to the front, once. */
	assert_int_equal(jc__manifest_add(m, direct, &sets[0], err, sizeof(err)), 0);
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 1);
	assert_int_equal(n_stat, got.n_stat);
	jc__inc_set_clear(&got);

	/* Damage: one flipped byte in the body makes the manifest unreadable. */
	char hex[33], mpath[700];
	jc__hex16(direct, hex);
	snprintf(mpath, sizeof(mpath), "%s/manifests/%.2s/%s", cache, hex, hex);
	int fd = open(mpath, O_RDWR);
	assert_true(fd >= 0);
	uint8_t byte;
	assert_int_equal(pread(fd, &byte, 1, 40), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(fd, &byte, 1, 40), 1);
	close(fd);
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 0);
	assert_int_equal(jc__manifest_add(m, direct, &sets[0], err, sizeof(err)), 0);
	assert_int_equal(jc__manifest_lookup(m, direct, &f->ctx, &got, &n_stat), 1);
	jc__inc_set_clear(&got);

	for (int i = 0; i <= JC_MANIFEST_VARIANTS; i++)
		jc__inc_set_clear(&sets[i]);
	jc__req_clear(&r);
	jc__manifests_close(m);
}

/* What the lexer cannot read literally widens the set (or says "disk"), never narrows it. */
static void test_conservative_forms(void **state)
{
	struct fx *f = *state;
	struct jc_req r;
	struct jc_inc_set set;
	char src[512];
	/* Without -I: each of these makes the request one that reads from disk. */
	const char *const wide[] = {
	    "#define P \"/x.h\"\n#include P\n", /* computed */
	    "#inc\\\nlude \"/x.h\"\n",		/* spliced */
	    "%:include \"/x.h\"\n",		/* digraph */
	    "?\?=include \"/x.h\"\n",		/* trigraph */
	    "#include \"../../x.h\"\n",		/* climb */
	    "#include <sub/../../x.h>\n",	/* climb, angle */
	    "#define H(x) __has_include(x)\n",	/* __has_include of a macro */
	    "#if __has_include(NAME)\n#endif\n",
	    "#line 1 \"/elsewhere/k.cu\"\n#include \"x.h\"\n", /* renames the file */
	    "# 1 \"/elsewhere/k.cu\"\n",
	    "#inc?\?/\nlude \"/x.h\"\n", /* trigraph splice */
	    NULL};
	for (int i = 0; wide[i]; i++) {
		make_req(f, &r, wide[i], NULL);
		if (jc__inc_needed(&r) != 1)
			fail_msg("not widened: %s", wide[i]);
		jc__req_clear(&r);
	}
	/* Literal names inside the in-memory texts stay on the fast path. */
	const char *const narrow[] = {"#include \"x.h\"\n#include <cuda/std/cstdint>\n",
				      "int x; // #include \"/etc/passwd\"\n", "#line 12\n", NULL};
	for (int i = 0; narrow[i]; i++) {
		make_req(f, &r, narrow[i], NULL);
		if (jc__inc_needed(&r) != 0)
			fail_msg("widened: %s", narrow[i]);
		jc__req_clear(&r);
	}
	/* An absolute or climbing program name. */
	make_req(f, &r, "#include \"x.h\"\n", NULL);
	free(r.source_name);
	r.source_name = strdup("/abs/dir/k.cu");
	assert_int_equal(jc__inc_needed(&r), 1);
	jc__req_clear(&r);
	/* With -I, a digraph or spliced include is followed like a plain one,
	 * and a macro'd __has_include takes the whole directory. */
	static const char *const dirs[] = {"inc", NULL};
	jct_put(f->root, "inc/dg.h", "");
	jct_put(f->root, "inc/other.h", "");
	jct_settle();
	make_req(f, &r, "%:include \"dg.h\"\n", dirs);
	scan(f, &r, &set);
	assert_int_equal(kind_of(f, &set, "inc/dg.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &set, "inc/other.h"), 0);
	assert_int_equal(set.fallback, 0);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
	snprintf(src, sizeof(src), "#define H(x) __has_include(x)\n#if H(\"q.h\")\n#endif\n");
	make_req(f, &r, src, dirs);
	scan(f, &r, &set);
	assert_int_equal(set.fallback, 1);
	assert_int_equal(kind_of(f, &set, "inc/other.h"), JC_INC_FILE);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

static struct jc_dep dep(const struct fx *f, const char *rel, uint32_t kind)
{
	struct jc_dep d = {.kind = kind};
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	d.path = strdup(path);
	struct stat st;
	if (kind == JC_DEP_FILE && stat(path, &st) == 0) {
		d.dev = st.st_dev, d.ino = st.st_ino, d.size = (uint64_t)st.st_size;
		d.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		d.ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	}
	return d;
}

/* The record of a compile against its key; learning the exact set. */
static void test_covers_and_learn(void **state)
{
	struct fx *f = *state;
	static const char *const dirs[] = {"inc", NULL};
	struct jc_req r;
	struct jc_inc_set set, learned;
	char what[512];
	jct_put(f->root, "inc/a.h", "#define A 1\n");
	jct_put(f->root, "elsewhere/b.h", "#define B 2\n");
	jct_settle();
	make_req(f, &r, "#include \"a.h\"\n", dirs);
	scan(f, &r, &set);
	struct jc_dep deps[4] = {
	    dep(f, "inc/a.h", JC_DEP_FILE), dep(f, "inc/nope.h", JC_DEP_ABSENT),
	    dep(f, "secret.h", JC_DEP_DENIED), dep(f, "elsewhere/b.h", JC_DEP_FILE)};
	/* a.h read with its scanned identity, a denied probe: covered. */
	assert_int_equal(jc__inc_covers(&set, deps, 1, what, sizeof(what)), 1);
	assert_int_equal(jc__inc_covers(&set, deps + 2, 1, what, sizeof(what)), 1);
	/* nope.h probed: not in the scan (a.h was found first); b.h never scanned. */
	assert_int_equal(jc__inc_covers(&set, deps, 2, what, sizeof(what)), 0);
	assert_non_null(strstr(what, "nope.h"));
	assert_int_equal(jc__inc_covers(&set, deps, 4, what, sizeof(what)), 0);
	assert_int_equal(jc__inc_covers(NULL, deps + 2, 1, what, sizeof(what)), 1);
	assert_int_equal(jc__inc_covers(NULL, deps, 1, what, sizeof(what)), 0);
	/* Learnt: exactly what was read, which then covers it. */
	assert_int_equal(jc__inc_learn(&set, deps, 4, &f->ctx, &learned, what, sizeof(what)), 1);
	assert_int_equal(learned.n, 3); /* the denied probe needs no entry */
	assert_int_equal(kind_of(f, &learned, "inc/a.h"), JC_INC_FILE);
	assert_int_equal(kind_of(f, &learned, "inc/nope.h"), JC_INC_ABSENT);
	assert_int_equal(kind_of(f, &learned, "elsewhere/b.h"), JC_INC_FILE);
	assert_int_equal(jc__inc_covers(&learned, deps, 4, what, sizeof(what)), 1);
	assert_int_equal(jc__inc_check(&learned, &f->ctx), 1);
	uint8_t digest[16];
	memcpy(digest, learned.digest, 16);
	jc__inc_set_clear(&learned);
	/* A file changed since the compile: nothing learnt. */
	jct_put(f->root, "elsewhere/b.h", "#define B 3\n");
	assert_int_equal(jc__inc_learn(&set, deps, 4, &f->ctx, &learned, what, sizeof(what)), 0);
	assert_non_null(strstr(what, "b.h"));
	/* With the new identity, a new digest. */
	jct_settle();
	free(deps[3].path);
	deps[3] = dep(f, "elsewhere/b.h", JC_DEP_FILE);
	assert_int_equal(jc__inc_learn(&set, deps, 4, &f->ctx, &learned, what, sizeof(what)), 1);
	assert_memory_not_equal(digest, learned.digest, 16);
	jc__inc_set_clear(&learned);
	/* The overflow marker is never covered. */
	struct jc_dep over = {.path = (char *)"", .kind = JC_DEP_OVERFLOW};
	assert_int_equal(jc__inc_covers(&set, &over, 1, what, sizeof(what)), 0);
	for (int i = 0; i < 4; i++)
		free(deps[i].path);
	jc__inc_set_clear(&set);
	jc__req_clear(&r);
}

/* Absent names under missing directories (CUB's probes next to a source):
 * re-checked with a stat per missing directory, not per name, and a file
 * that appears under any of them, at any depth, is still a difference. */
static void test_absent_below_missing_dirs(void **state)
{
	struct fx *f = *state;
	static const char *const absent[] = {"inc/cub/block/block_exchange.cuh",
					     "inc/cub/block/block_load.cuh",
					     "inc/cub/block/block_store.cuh",
					     "inc/cub/util_type.cuh",
					     "inc/cub/warp/warp_scan.cuh",
					     "inc/cuda/std/type_traits",
					     "inc/cuda/std/utility",
					     "inc/cuda/std/cstdint",
					     "inc/missing.h",
					     "inc/nv/target",
					     NULL};
	struct jc_inc_set set = {0};
	char p[512];
	jct_put(f->root, "inc/a.h", "#define A 1\n");
	for (int i = 0; absent[i]; i++) {
		path_of(f, absent[i], p, sizeof(p));
		assert_int_equal(jc__inc_set_add(&set, p, strlen(p), JC_INC_ABSENT, NULL), 0);
	}
	for (int i = 0; i < 40; i++) { /* as many more in two of those directories */
		snprintf(p, sizeof(p), "%s/inc/%s/h%d.cuh", f->root,
			 i % 2 ? "cub/block" : "cuda/std", i);
		assert_int_equal(jc__inc_set_add(&set, p, strlen(p), JC_INC_ABSENT, NULL), 0);
	}
	assert_int_equal(jc__inc_set_finish(&set), 0);
	assert_int_equal(check(f, &set), 1);
	/* a stat per missing directory and per name directly in one that
	 * exists (and one for that directory), not one per name: 50 names */
	assert_in_range(set.n_stat, 1, 12);
	/* A directory that appears changes nothing while its names stay absent. */
	path_of(f, "inc/cub", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(check(f, &set), 1);
	/* A header that appears under a missing directory, at any depth. */
	static const char *const appear[] = {"inc/cub/block/block_load.cuh", "inc/cuda/std/cstdint",
					     "inc/cub/warp/warp_scan.cuh", "inc/nv/target", NULL};
	for (int i = 0; appear[i]; i++) {
		jct_put(f->root, appear[i], "#pragma once\n");
		if (check(f, &set) != 0)
			fail_msg("%s appeared, and the set still matches", appear[i]);
		path_of(f, appear[i], p, sizeof(p));
		assert_int_equal(unlink(p), 0);
		assert_int_equal(check(f, &set), 1);
	}
	jc__inc_set_clear(&set);
}

/*
 * A file that uses a file name macro as a token is hashed with its path
 * (jc__inc_file_hash): the same bytes at two paths are two hashes; in a
 * comment or a string, or without one, the bytes alone decide.
 */
/* text's FILE hash at two paths: with uses (a __FILE__-like token), each
 * path its own and neither the bytes' plain hash; else both the plain hash. */
static void file_hash_case(const char *text, int uses)
{
	uint8_t a[16], b[16], plain[16];
	size_t n = strlen(text);
	assert_int_equal(jc__inc_file_hash("/x/inc/a.h", text, n, NULL, a), 0);
	assert_int_equal(jc__inc_file_hash("/yy/inc/a.h", text, n, NULL, b), 0);
	jc__inc_hash128(text, n, plain);
	if (uses) {
		assert_memory_not_equal(a, b, 16);
		assert_memory_not_equal(a, plain, 16);
	} else {
		assert_memory_equal(a, b, 16);
		assert_memory_equal(a, plain, 16);
	}
}

static void test_file_macro_hash(void **state)
{
	(void)state;
	static const char *const uses[] = {
	    "static constexpr int n = sizeof(__FILE__);\n",
	    "#define WHERE __BASE_FILE__\n",
	    "int f(const char *s = __builtin_FILE());\n",
	    "const char *b = __FILE_NAME__;\n",
	};
	static const char *const not_uses[] = {
	    "// __FILE__\n",
	    "const char *s = \"__FILE__\";\n",
	    "int FILE_COUNT = 3; int __FILE__x;\n",
	};
	for (size_t i = 0; i < sizeof(uses) / sizeof(*uses); i++)
		file_hash_case(uses[i], 1);
	for (size_t i = 0; i < sizeof(not_uses) / sizeof(*not_uses); i++)
		file_hash_case(not_uses[i], 0);
}

/* jc__inc_name_reach for source src, in-memory header hdr (or NULL) and
 * option opt (or NULL) against the deps of ROOT/inc/NAME (NULL-terminated). */
static int reach(const struct fx *f, const char *src, const char *hdr, const char *opt,
		 const char *const *names, char *what, size_t len)
{
	struct jc_req r;
	struct jc_dep deps[4] = {0};
	size_t n = 0;
	make_req(f, &r, src, NULL);
	if (hdr) {
		r.headers = calloc(1, sizeof(*r.headers));
		r.headers[0].name = strdup("mem.h");
		r.headers[0].data = (uint8_t *)strdup(hdr);
		r.headers[0].size = strlen(hdr);
		r.n_headers = 1;
	}
	if (opt)
		assert_int_equal(jc__strv_push(&r.options, opt), 0);
	for (; names[n]; n++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "inc/%s", names[n]);
		deps[n] = dep(f, rel, JC_DEP_FILE);
	}
	what[0] = 0;
	int rc = jc__inc_name_reach(&r, deps, n, &f->ctx, what, len);
	for (size_t i = 0; i < n; i++)
		free(deps[i].path);
	jc__req_clear(&r);
	return rc;
}

/* 1 when the source src, with ROOT/inc/NAME read, is bound to its name; what
 * says why, which must hold want (or anything when want is NULL). */
static int bound(const struct fx *f, const char *src, const char *name, const char *want)
{
	char what[700];
	const char *const names[] = {name, NULL};
	int rc = reach(f, src, NULL, NULL, names, what, sizeof(what));
	if (rc == 1 && want && !strstr(what, want))
		fail_msg("%s: %s, not %s", name, what, want);
	return rc;
}

/*
 * The program name check: a header's macro that expands __FILE__ matters
 * only where the source (or an in-memory header, or an option) expands it,
 * through any chain of macros; __builtin_FILE, __builtin_source_location and
 * __BASE_FILE__ in a header's code (a default argument) always; a macro the
 * source expands that pastes (##), or a paste in the source, always; what a
 * comment, a trigraph splice or a file changed since the compile hides
 * cannot clear it.
 */
static void test_name_reach(void **state)
{
	struct fx *f = *state;
	char what[700];
	jct_put(f->root, "inc/a.h",
		"#define INNER ((int)sizeof(__FILE__))\n#define WHERE (INNER + 1)\n#define USED 1\n"
		"#if __has_builtin(__builtin_FILE)\n#endif\nint here = WHERE;\n");
	jct_put(f->root, "inc/b.h", "int f(const char *s = __builtin_FILE());\n");
	jct_put(f->root, "inc/e.h", "const char *where = __BASE_FILE__;\n");
	jct_put(f->root, "inc/l.h", "int g(const void *p = __builtin_source_location());\n");
	jct_put(f->root, "inc/c.h", "#define CAT(x, y) x##y\n#define P CAT(__FI, LE__)\n");
	jct_put(f->root, "inc/n.h",
		"#define HDR_LEN ((int)sizeof(__FILE__))\n#define GET(x) HDR_##x\n#define EXTRA "
		"GET(LEN)\n");
	jct_put(f->root, "inc/m.h", "#define EXTRA /*\n*/ ((int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/p.h",
		"#pragma once /* the old\n R\"( form */\n#define EXTRA ((int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/t.h", "// ?\?/\n#define EXTRA ((int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/k.h",
		"#define CAT(a, b) a##b\nconstexpr int hv = sizeof(CAT(__BASE_, FILE__));\n");
	jct_put(f->root, "inc/s1.h", "#define EXTRA (1'0 + (int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/s2.h",
		"#define FOOR\n#define EXTRA ((int)sizeof(FOOR\"(\" __FILE__ \")\"))\n");
	jct_put(f->root, "inc/s3.h",
		"#define \\u00e9X ((int)sizeof(__FILE__))\n#define EXTRA \\u00e9X\n");
	jct_put(f->root, "inc/s4.h",
		"#line 1 __BASE_FILE__\nconstexpr int hv = sizeof(__FILE__);\n#define EXTRA hv\n");
	jct_put(f->root, "inc/s5.h", "#define EXTRA ((int)sizeof(\"//\" __FILE__))\n");
	jct_put(f->root, "inc/s6.h", "#define EXTRA ((int)sizeof(\"/*\" __FILE__))\n/* */\n");
	jct_put(f->root, "inc/r1.h",
		"#define SECOND(a, b, c) b\n#define EXTRA SECOND(<, ((int)sizeof(__FILE__)), >)\n");
	jct_put(f->root, "inc/r2.h", "#define EXTRA /*\n// */ ((int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/r3.h", "#define EXTRA /*\n\" */ ((int)sizeof(__FILE__))\n");
	jct_put(f->root, "inc/r4.h",
		"#define CAT(a, b) a##b\n#define MY_BASE __BASE_FILE__\n"
		"constexpr int hv = sizeof(CAT(MY_, BASE));\n");
	jct_put(f->root, "inc/r5.h",
		"#define R\n#define EXTRA ((int)sizeof(R\"(\" __FILE__ \")\"))\n");
	jct_put(f->root, "inc/r6.h",
		"#define SECOND(a, b) b\n#define EXTRA SECOND(0'x', ((int)sizeof(__FILE__)))\n");
	jct_put(
	    f->root, "inc/s7.h",
	    "#if __has_include(<a/*b>)\n#endif\n#define EXTRA ((int)sizeof(__FILE__))\n// */\n");
	struct jc_inc_buf chain = {0};
	for (int i = 0; i < 300; i++) { /* defined in the order that takes a pass a step */
		char d[64];
		int k = snprintf(d, sizeof(d), "#define C%d C%d\n", i, i + 1);
		assert_int_equal(jc__inc_buf_add(&chain, d, (size_t)k), 0);
	}
	assert_int_equal(jc__inc_buf_add(&chain, "#define C300 sizeof(__FILE__)\n", 30), 0);
	assert_int_equal(jc__inc_buf_add(&chain, "", 1), 0);
	jct_put(f->root, "inc/chain.h", (const char *)chain.p);
	free(chain.p);
	jct_settle();
	static const char *const a[] = {"a.h", NULL};
	/* defined, used in the header's own code, named in a comment or a string */
	assert_int_equal(
	    bound(f, "int x = USED; // WHERE\nconst char *s = \"WHERE\";\n", "a.h", NULL), 0);
	assert_int_equal(
	    bound(f, "int x = WHERE;\n", "a.h", "WHERE (expanding __FILE__, defined in "), 1);
	assert_int_equal(
	    reach(f, "int x = USED;\n", "int y = WHERE;\n", NULL, a, what, sizeof(what)), 1);
	assert_int_equal(
	    reach(f, "int x = EXTRA;\n", NULL, "-DEXTRA=sizeof(__FILE__)", a, what, sizeof(what)),
	    1);
	assert_int_equal(bound(f, "int x = sizeof(__FILE__);\n", "a.h", NULL), 1);
	assert_int_equal(bound(f, "int x;\n", "b.h", "__builtin_FILE used in "), 1);
	assert_int_equal(bound(f, "int x;\n", "e.h", "__BASE_FILE__ used in "), 1);
	assert_int_equal(bound(f, "int x;\n", "l.h", "__builtin_source_location used in "), 1);
	/* pastes: the source's, or a macro's the source expands */
	assert_int_equal(bound(f, "int x;\n", "c.h", NULL), 0);
	assert_int_equal(bound(f, "int x = sizeof(P);\n", "c.h", "expands CAT, which pastes"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "n.h", "expands GET, which pastes"), 1);
	assert_int_equal(bound(f, "#define Q(a, b) a##b\nint x = sizeof(Q(__F, ILE__));\n", "a.h",
			       "ILE__, which ## could paste"),
			 1);
	assert_int_equal(reach(f, "int x = EXTRA;\n", NULL, "-DEXTRA=sizeof(CAT(__F, ILE__))", a,
			       what, sizeof(what)),
			 1);
	assert_int_equal(
	    reach(f, "int x = sizeof(P);\n", NULL, "-DP(a,b)=a##b", a, what, sizeof(what)), 1);
	assert_non_null(strstr(what, "the source pastes"));
	/* a header's code pasting a name that is the source's anywhere */
	assert_int_equal(bound(f, "int x = hv;\n", "k.h", "__BASE_, which ## could paste"), 1);
	/* what a lexer could misread: a digit separator, a name ending in R
	 * before a string, a universal character name, #line, literals and a
	 * header name that hold comment starts */
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s1.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s2.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s3.h", "universal character name"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s4.h", "__BASE_FILE__ used in "), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s5.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s6.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "s7.h", "EXTRA (expanding __FILE__"), 1);
	/* a third round: '<' in a macro's arguments, a comment that carries a
	 * #define on, a paste of a macro's name in a header's code, C++03's
	 * R"( and C++11's 0'x' */
	assert_int_equal(bound(f, "int x = EXTRA;\n", "r1.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "r2.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "r3.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(
	    bound(f, "int x = hv;\n", "r4.h", "BASE, which ## could paste into MY_BASE"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "r5.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "r6.h", "EXTRA (expanding __FILE__"), 1);
	/* the toolkit's source_location::current(), named by the source */
	assert_int_equal(reach(f, "int x = cuda::std::source_location::current().line();\n", NULL,
			       NULL, (const char *const[]){NULL}, what, sizeof(what)),
			 1);
	assert_non_null(strstr(what, "source_location used in the source"));
	/* a comment that carries a directive on, a trigraph splice */
	assert_int_equal(bound(f, "int x = EXTRA;\n", "m.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "p.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = EXTRA;\n", "t.h", "EXTRA (expanding __FILE__"), 1);
	assert_int_equal(bound(f, "int x = C0;\n", "chain.h", "macro chains longer than"), 1);
	/* nothing names a file: no file is read */
	assert_int_equal(
	    reach(f, "int x;\n", NULL, NULL, (const char *const[]){NULL}, what, sizeof(what)), 0);
	/* changed since the compile saw it */
	struct jc_req r;
	make_req(f, &r, "int x = USED;\n", NULL);
	struct jc_dep da = dep(f, "inc/a.h", JC_DEP_FILE);
	jct_put(f->root, "inc/a.h", "#define INNER ((int)sizeof(__FILE__))\n#define USED 2\n");
	assert_int_equal(jc__inc_name_reach(&r, &da, 1, &f->ctx, what, sizeof(what)), 1);
	assert_non_null(strstr(what, "changed or cannot be read"));
	free(da.path);
	jc__req_clear(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_directives, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_digest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_search_path_and_shadowing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memo_and_settle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_computed_fallback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_toolkit_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_options_and_roots, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_manifest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_conservative_forms, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_covers_and_learn, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_absent_below_missing_dirs, setup, teardown),
	    cmocka_unit_test(test_file_macro_hash),
	    cmocka_unit_test_setup_teardown(test_name_reach, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
