/* SPDX-License-Identifier: MIT */
/*
 * The real-workload conformance suite (tests/README.md, suite
 * `conformance`; issue 22): kernels in the styles real projects use, each
 * compiled through every path a user has:
 *
 *   local     a daemon of the user's own uid (jitcachectl compile / link)
 *   fleet     two daemons with their own caches on one Redis: the second
 *             compiles nothing
 *   team      a daemon run as another uid (--group-shared) and a real
 *             second user whose client reads the include trees
 *   shim      the NVRTC shim (jitcache-run) under an NVRTC application in
 *             C and one in Python over ctypes (conformance_app.{c,py})
 *   fallback  no daemon (JITCACHE_AUTOSTART=0): the client library compiles
 *             in process
 *
 * The reference is plain NVRTC (and nvJitLink) of the same build, in a
 * process of its own: conformance_app without the shim. For each path and
 * case: the artifact's bytes and the lowered names equal the reference's;
 * the compile counts are the expected ones (a miss, then a hit; the
 * daemons' `compiles`, the shim's report); then conf_params.h, a header
 * every case includes, is changed and each case is a miss with the new
 * bytes. The references are made once for both header versions and shared
 * by every path.
 *
 * Cases: CUB block radix sort + reduce (examples/cub_sort.cu), cuda::std
 * (<cuda/std/type_traits>, <cuda/std/complex>), cuda_fp16.h / cuda_bf16.h
 * arithmetic, cooperative groups, a template with 32 name expressions,
 * -dlto + nvJitLink with a device library, #pragma unroll and
 * __launch_bounds__, a header generated per run, a symlinked include tree
 * (a linked -I directory, a header linked out of every -I directory), a
 * header-only library in a user -I tree of 1,024 files. Sources in
 * tests/conformance/cases/.
 *
 * `conformance_test gpu` (suite gpu too) compiles every case through a
 * local daemon and runs each one's conf_check kernel on the GPU
 * (conformance_gpu), checking its results; it exits 77 without a GPU.
 *
 * Usage: conformance_test all | PATH... (local fleet team shim fallback
 * gpu; all: every one but gpu). Paths that need what is
 * missing here (root and setpriv for team, redis-server for fleet, python3
 * for the ctypes program) are skipped with a message.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"
#include "tests/remote/redis_fx.h"

#define N_CASES 10
#define ARCH	"sm_90"

struct ccase {
	const char *name; /* cases/NAME.cu */
	const char *opts; /* NVRTC options; @INC @SYM @EX @CCCL @CUDA are replaced */
	const char *expr; /* one name expression, "32" for tk<0>..tk<31>, or NULL */
	int dlto;	  /* -dlto, linked with cases/dlto_lib.cu by nvJitLink -lto */
	int expect;	  /* conf_check's out[0]; 0 for the generated header's value */
};

static const struct ccase cases[N_CASES] = {
    {"cub", "-std=c++17 -I@INC -I@EX -I@CCCL", "sort_and_sum<128, 8>", 0, 128},
    {"custd", "-std=c++17 -I@INC -I@CCCL", "cmul<float>", 0, -490},
    {"half", "-I@INC -I@CUDA", "hscale", 0, 603375},
    {"cg", "-std=c++17 -I@INC -I@CCCL -I@CUDA", "warp_sums", 0, 496},
    {"templ32", "-I@INC", "32", 0, 961},
    {"dlto", "-rdc=true -I@INC", NULL, 1, 750},
    {"unroll", "-I@INC", "unrolled", 0, 120},
    {"gen", "-I@INC", "gen_k", 0, 0},
    {"symlink", "-I@INC -I@SYM", "sym_k", 0, 7007},
    {"hol", "-I@INC", "hol_k", 0, 1030},
};

/* The two versions of conf_params.h: CONF_VALUE. */
static const int conf_value[2] = {11, 22};

static struct {
	char root[JTL_ROOT_MAX];
	char tree[300];	 /* the user's files: inc/, real_sym/, symlinked -> real_sym, outside/ */
	char out[300];	 /* artifacts the paths write */
	char ref[300];	 /* references: CASE.V.cubin, CASE.V.names */
	char cases[320]; /* a copy of tests/conformance/cases (the second user reads it) */
	int gen_run;	 /* GEN_RUN of this run */
	char group[32], user[32], daemon_user[32];
	gid_t gid;
	int have_users;
	/* What a path started, stopped by path_teardown even when the path
	 * fails (a daemon left running would hold the test's output open). */
	struct jtl_daemon d[2];
	int n_d, d_as_user;
	struct jct_redis redis;
	int redis_up;
} fx;

static const char *env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		fprintf(stderr, "%s is not set (run through meson test)\n", name);
		exit(1);
	}
	return v;
}

/* --- the user's tree --------------------------------------------------------- */

static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(const char *rel, const char *fmt, ...)
{
	char path[600], text[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", fx.tree, rel);
	jct_write_text(path, text);
}

/* conf_params.h at version v (0 or 1). */
static void set_conf(int v)
{
	put("inc/conf_params.h", "#pragma once\n#define CONF_VALUE %d\n", conf_value[v]);
}

/* The header a code generator writes before every compile: same bytes,
 * a fresh file. */
static void generate(void)
{
	put("inc/gen_run.h", "#pragma once\n#define GEN_RUN %d\n", fx.gen_run);
}

static void make_tree(void)
{
	assert_int_equal(jct_sh("mkdir -p %s/inc/hol %s/real_sym/sym %s/outside %s/examples && ln "
				"-s real_sym %s/symlinked "
				"&& cp -r %s/cases %s/ && cp %s/cub_sort.cu %s/examples/",
				fx.tree, fx.tree, fx.tree, fx.tree, fx.tree,
				env("JC_CONFORMANCE_DIR"), fx.tree, env("JC_EXAMPLES"), fx.tree),
			 0);
	set_conf(0);
	generate();
	put("outside/linked.h", "#pragma once\n#define LINKED_VALUE 7000\n");
	put("real_sym/sym/local.h", "#pragma once\n#define LOCAL_VALUE 7\n");
	assert_int_equal(jct_sh("ln -s ../../outside/linked.h %s/real_sym/sym/linked.h", fx.tree),
			 0);
	/* a header-only library: hol/dNN/hN.h, 1,024 files, and hol/all.h */
	char all[64 * 1024];
	size_t w = (size_t)snprintf(all, sizeof(all), "#pragma once\n");
	for (int i = 0; i < 1024; i++) {
		char rel[400];
		if (i % 32 == 0) {
			snprintf(rel, sizeof(rel), "%s/inc/hol/d%02d", fx.tree, i / 32);
			assert_int_equal(mkdir(rel, 0755), 0);
		}
		snprintf(rel, sizeof(rel), "inc/hol/d%02d/h%d.h", i / 32, i);
		put(rel, "#pragma once\n__device__ __forceinline__ int hol_%d() { return %d; }\n",
		    i, i);
		w += (size_t)snprintf(all + w, sizeof(all) - w, "#include <hol/d%02d/h%d.h>\n",
				      i / 32, i);
	}
	char path[400];
	snprintf(path, sizeof(path), "%s/inc/hol/all.h", fx.tree);
	jct_write_text(path, all);
}

/* The options of c, one shell word each (our paths need no quoting), with
 * @INC, @SYM, @EX, @CCCL and @CUDA replaced. */
static void options(const struct ccase *c, char *out, size_t len)
{
	char inc[400], sym[400], ex[400], cccl[400];
	const char *cuda = env("JC_CUDA_INCLUDE");
	snprintf(inc, sizeof(inc), "%s/inc", fx.tree);
	snprintf(sym, sizeof(sym), "%s/symlinked", fx.tree);
	snprintf(ex, sizeof(ex), "%s/examples", fx.tree);
	snprintf(cccl, sizeof(cccl), "%s/cccl", cuda);
	const struct {
		const char *at, *with;
	} subst[] = {{"@INC", inc}, {"@SYM", sym}, {"@EX", ex}, {"@CCCL", cccl}, {"@CUDA", cuda}};
	size_t w = 0;
	out[0] = '\0';
	for (const char *p = c->opts; *p;) {
		size_t k = 0, n = sizeof(subst) / sizeof(subst[0]);
		while (k < n && strncmp(p, subst[k].at, strlen(subst[k].at)) != 0)
			k++;
		if (k < n) {
			w += (size_t)snprintf(out + w, len - w, "%s", subst[k].with);
			p += strlen(subst[k].at);
		} else {
			w += (size_t)snprintf(out + w, len - w, "%c", *p++);
		}
	}
}

/* The name expressions of c as repeated "FLAG 'EXPR'" words. */
static void exprs(const struct ccase *c, const char *flag, char *out, size_t len)
{
	size_t w = 0;
	out[0] = '\0';
	if (c->expr && !strcmp(c->expr, "32")) {
		for (int n = 0; n < 32; n++)
			w += (size_t)snprintf(out + w, len - w, " %s 'tk<%d>'", flag, n);
	} else if (c->expr) {
		snprintf(out, len, " %s '%s'", flag, c->expr);
	}
}

/* --- running things ---------------------------------------------------------- */

/* sh -c CMD (as fx.user when as_user), stdout to *out, stderr to *err
 * (both malloc'd, may be NULL). Returns the exit status. */
static int run(int as_user, char **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int run(int as_user, char **out, char **err, const char *fmt, ...)
{
	char cmd[12000], o[400], e[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(o, sizeof(o), "%s/run.out", fx.root);
	snprintf(e, sizeof(e), "%s/run.err", fx.root);
	int rc;
	if (as_user)
		rc = jct_sh("setpriv --reuid %s --regid %s --groups %u -- sh -c \"%s\" > %s 2> %s",
			    fx.user, fx.group, (unsigned)fx.gid, cmd, o, e);
	else
		rc = jct_sh("%s > %s 2> %s", cmd, o, e);
	size_t n;
	char *so = (char *)jtl_read_file(o, &n), *se = (char *)jtl_read_file(e, &n);
	if (out)
		*out = so ? so : strdup("");
	else
		free(so);
	if (err)
		*err = se ? se : strdup("");
	else
		free(se);
	return rc;
}

/* conformance_app's "lowered E L" lines of text, in order, into names. */
static void app_names(const char *text, char *names, size_t len)
{
	size_t w = 0;
	names[0] = '\0';
	for (const char *l = text; (l = strstr(l, "lowered ")); l++) {
		if (l != text && l[-1] != '\n')
			continue;
		const char *nl = strchrnul(l, '\n');
		w += (size_t)snprintf(names + w, len - w, "%.*s\n", (int)(nl - l - 8), l + 8);
	}
}

/* jitcachectl's "EXPR<TAB>LOWERED" lines, in the same form. */
static void ctl_names(const char *text, char *names, size_t len)
{
	size_t w = 0;
	names[0] = '\0';
	for (const char *l = text; *l;) {
		const char *nl = strchrnul(l, '\n'), *tab = memchr(l, '\t', (size_t)(nl - l));
		if (tab)
			w += (size_t)snprintf(names + w, len - w, "%.*s %.*s\n", (int)(tab - l), l,
					      (int)(nl - tab - 1), tab + 1);
		l = *nl ? nl + 1 : nl;
	}
}

/* The reference of case i at conf version v: plain NVRTC (conformance_app). */
static void make_ref(int i, int v)
{
	const struct ccase *c = &cases[i];
	char opts[2000], ex[2000], out[600], lib[400] = "";
	options(c, opts, sizeof(opts));
	exprs(c, "--expr", ex, sizeof(ex));
	if (c->dlto)
		snprintf(lib, sizeof(lib), "--lib %s/dlto_lib.cu", fx.cases);
	snprintf(out, sizeof(out), "%s/%s.%d.cubin", fx.ref, c->name, v);
	char *so, *se;
	generate();
	int rc = run(0, &so, &se, "%s %s %s -o %s %s/%s.cu %s %s", env("JC_CONFORMANCE_APP"), lib,
		     ex, out, fx.cases, c->name, ARCH, opts);
	if (rc != 0)
		fail_msg("reference of %s: exit %d\n%s%s", c->name, rc, so, se);
	char names[8192], path[600];
	app_names(so, names, sizeof(names));
	snprintf(path, sizeof(path), "%s/%s.%d.names", fx.ref, c->name, v);
	jct_write_text(path, names);
	free(so);
	free(se);
}

/* Fails unless the artifact at got and the names are case i's reference at v. */
static void check_ref(const char *path_name, int i, int v, const char *got, const char *names)
{
	char ref[600];
	size_t n1, n2, nn;
	snprintf(ref, sizeof(ref), "%s/%s.%d.cubin", fx.ref, cases[i].name, v);
	uint8_t *a = jtl_read_file(ref, &n1), *b = jtl_read_file(got, &n2);
	assert_non_null(a);
	if (!b || n1 != n2 || memcmp(a, b, n1) != 0)
		fail_msg("%s, %s, CONF_VALUE %d: the artifact (%zu bytes) is not plain NVRTC's "
			 "(%zu bytes)",
			 path_name, cases[i].name, conf_value[v], b ? n2 : 0, n1);
	snprintf(ref, sizeof(ref), "%s/%s.%d.names", fx.ref, cases[i].name, v);
	char *want = (char *)jtl_read_file(ref, &nn);
	assert_non_null(want);
	if (strcmp(want, names) != 0)
		fail_msg("%s, %s: lowered names\n%s\nplain NVRTC:\n%s", path_name, cases[i].name,
			 names, want);
	free(a);
	free(b);
	free(want);
}

/* The 2 versions' references differ (the header change is a change). */
static void make_refs(void)
{
	for (int v = 0; v < 2; v++) {
		set_conf(v);
		for (int i = 0; i < N_CASES; i++)
			make_ref(i, v);
	}
	set_conf(0);
	for (int i = 0; i < N_CASES; i++) {
		char a[600], b[600];
		snprintf(a, sizeof(a), "%s/%s.0.cubin", fx.ref, cases[i].name);
		snprintf(b, sizeof(b), "%s/%s.1.cubin", fx.ref, cases[i].name);
		assert_int_not_equal(jct_sh("cmp -s %s %s", a, b), 0);
	}
}

/* --- the paths through jitcachectl ----------------------------------------------- */

struct ctl_path {
	const char *name;
	const char *sock; /* NULL: no daemon (the in-process fallback) */
	int as_user;	  /* run as fx.user (the team daemon's client) */
};

/* First word of jitcachectl's status line on stderr. */
static void status_word(const char *err, char word[16])
{
	const char *l = err;
	word[0] = '\0';
	for (; *l; l = strchrnul(l, '\n'), l += *l != '\0')
		if (sscanf(l, "%15s", word) == 1 &&
		    (!strcmp(word, "hit") || !strcmp(word, "miss") || !strcmp(word, "uncached") ||
		     !strcmp(word, "remote-hit") || !strcmp(word, "joined")))
			return;
	word[0] = '\0';
}

static void expect_word(const struct ctl_path *p, const char *what, const char *err,
			const char *want)
{
	char word[16];
	status_word(err, word);
	if (want && strcmp(word, want) != 0)
		fail_msg("%s, %s: %s, wanted %s\n%s", p->name, what, word[0] ? word : "(no status)",
			 want, err);
}

/* jitcachectl [--socket S] ARGS for p: the command prefix. */
static void ctl_prefix(const struct ctl_path *p, char *out, size_t len)
{
	if (p->sock)
		snprintf(out, len, "%s --socket %s", env("JITCACHECTL"), p->sock);
	else
		snprintf(
		    out, len,
		    "env -u JITCACHE_SOCKET XDG_RUNTIME_DIR=%s/no-runtime JITCACHE_DIR=%s/no-cache "
		    "JITCACHE_AUTOSTART=0 %s",
		    fx.root, fx.root, env("JITCACHECTL"));
}

/* Case i through p at conf version v; want: the status word of its compile
 * ("miss", "hit", "uncached"; NULL: any). Returns the jobs that compiled
 * (status "miss": 1, or 3 for -dlto's two compiles and a link). */
static int ctl_case(const struct ctl_path *p, int i, int v, const char *want)
{
	const struct ccase *c = &cases[i];
	char pre[600], opts[2000], ex[2000], out[600], cmd[6000];
	ctl_prefix(p, pre, sizeof(pre));
	options(c, opts, sizeof(opts));
	exprs(c, "--name-expr", ex, sizeof(ex));
	snprintf(out, sizeof(out), "%s/%s.%s.cubin", fx.out, p->name, c->name);
	remove(out);
	generate();
	char *so, *se;
	int compiled = 0, rc;
	if (!c->dlto) {
		snprintf(cmd, sizeof(cmd), "%s compile %s/%s.cu --arch %s -o %s%s -- %s", pre,
			 fx.cases, c->name, ARCH, out, ex, opts);
		if ((rc = run(p->as_user, &so, &se, "%s", cmd)) != 0)
			fail_msg("%s, %s: exit %d\n%s%s", p->name, c->name, rc, so, se);
		expect_word(p, c->name, se, want);
		compiled += strncmp(se, "miss", 4) == 0 || strstr(se, "\nmiss") != NULL;
	} else {
		/* The LTO-IR in a directory of the path's own, under the same names
		 * on every path, as two machines building one project have them:
		 * the names reach nvJitLink (its log names them) and are keyed. */
		char dir[600], lto[2][700];
		const char *src[2] = {c->name, "dlto_lib"};
		snprintf(dir, sizeof(dir), "%s/%s", fx.out, p->name);
		assert_true(mkdir(dir, 0777) == 0 || errno == EEXIST);
		assert_int_equal(chmod(dir, 0777), 0);
		so = strdup("");
		for (int k = 0; k < 2; k++) {
			snprintf(lto[k], sizeof(lto[k]), "%s/%s.ltoir", dir, src[k]);
			char *o2;
			if ((rc = run(p->as_user, &o2, &se,
				      "%s compile %s/%s.cu --arch %s --output ltoir -o %s -- %s",
				      pre, fx.cases, src[k], ARCH, lto[k], opts)) != 0)
				fail_msg("%s, %s: exit %d\n%s%s", p->name, src[k], rc, o2, se);
			/* the library does not include conf_params.h: a hit after the change */
			expect_word(p, src[k], se,
				    k == 1 && v == 1 && want && !strcmp(want, "miss") ? "hit"
										      : want);
			compiled += strstr(se, "miss") == se;
			free(o2);
			free(se);
		}
		free(so);
		if ((rc = run(p->as_user, &so, &se, "%s link --arch %s --lto -o %s %s %s", pre,
			      ARCH, out, lto[0], lto[1])) != 0)
			fail_msg("%s, link: exit %d\n%s%s", p->name, rc, so, se);
		expect_word(p, "the link", se, want);
		compiled += strstr(se, "miss") == se;
	}
	char names[8192];
	ctl_names(so, names, sizeof(names));
	check_ref(p->name, i, v, out, names);
	free(so);
	free(se);
	return compiled;
}

/* Every case through p at version v, each with status want; returns the
 * jobs compiled. */
static int ctl_all(const struct ctl_path *p, int v, const char *want)
{
	int n = 0;
	for (int i = 0; i < N_CASES; i++)
		n += ctl_case(p, i, v, want);
	return n;
}

/* The jobs of every case: one each, three for -dlto. */
static int all_jobs(void)
{
	int n = 0;
	for (int i = 0; i < N_CASES; i++)
		n += cases[i].dlto ? 3 : 1;
	return n;
}

/* A daemon of this uid with flags, on its own cache; stopped by path_teardown. */
static struct jtl_daemon *daemon_start(const char *const *flags)
{
	struct jtl_daemon *d = &fx.d[fx.n_d++];
	jct_daemon_init(d);
	jct_daemon_start(d, flags);
	return d;
}

static int path_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < fx.n_d; i++) {
		if (fx.d_as_user)
			jct_daemon_stop_as(&fx.d[i]);
		jct_daemon_cleanup(&fx.d[i]);
	}
	fx.n_d = fx.d_as_user = 0;
	if (fx.redis_up)
		jct_redis_cleanup(&fx.redis);
	fx.redis_up = 0;
	return 0;
}

/* miss, hit, changed header: miss with the new bytes; d's compiles counted. */
static void three_rounds(const struct ctl_path *p, const struct jtl_daemon *d)
{
	int jobs = all_jobs();
	set_conf(0);
	int64_t c0 = jct_stat(d, "compiles");
	assert_int_equal(ctl_all(p, 0, "miss"), jobs);
	int64_t c1 = jct_stat(d, "compiles");
	assert_int_equal(c1 - c0, jobs);
	assert_int_equal(ctl_all(p, 0, "hit"), 0);
	int64_t c2 = jct_stat(d, "compiles");
	assert_int_equal(c2 - c1, 0);
	set_conf(1);
	assert_int_equal(ctl_all(p, 1, "miss"), jobs - 1);
	assert_int_equal(jct_stat(d, "compiles") - c2, jobs - 1);
	set_conf(0);
}

static void test_local(void **state)
{
	(void)state;
	struct jtl_daemon *d = daemon_start(NULL);
	struct ctl_path p = {"local", d->sock, 0};
	three_rounds(&p, d);
}

/* No daemon: every compile is the library's own, in process ("uncached"),
 * before and after the header change. */
static void test_fallback(void **state)
{
	(void)state;
	struct ctl_path p = {"fallback", NULL, 0};
	for (int v = 0; v < 2; v++) {
		set_conf(v);
		ctl_all(&p, v, "uncached");
	}
	set_conf(0);
}

static void test_fleet(void **state)
{
	(void)state;
	if (!jct_redis_available()) {
		fprintf(stderr, "fleet: skipped: no redis-server / redis-cli\n");
		skip();
	}
	jct_redis_start(&fx.redis, fx.root, 0, NULL);
	fx.redis_up = 1;
	const char *flags[] = {"--remote",    fx.redis.url, "--remote-unsigned",
			       "--log-level", "info",	    NULL};
	struct jtl_daemon *a = daemon_start(flags), *b = daemon_start(flags);
	struct ctl_path pa = {"fleet-a", a->sock, 0}, pb = {"fleet-b", b->sock, 0};
	int jobs = all_jobs();
	for (int v = 0; v < 2; v++) {
		set_conf(v);
		/* A compiles (and publishes); B, a fresh cache, compiles nothing */
		int64_t pub = jct_stat(a, "remote_publishes");
		int64_t want = v == 0 ? jobs : jobs - 1;
		assert_int_equal(ctl_all(&pa, v, "miss"), want);
		assert_true(jct_wait_stat(a, "remote_publishes", jct_ge, pub + want, 20000) >=
			    pub + want);
		char compiled[400] = "";
		for (int i = 0; i < N_CASES; i++) {
			int64_t cb = jct_stat(b, "compiles");
			ctl_case(&pb, i, v, NULL);
			int64_t n = jct_stat(b, "compiles") - cb;
			if (n)
				snprintf(compiled + strlen(compiled),
					 sizeof(compiled) - strlen(compiled), " %s (%lld)",
					 cases[i].name, (long long)n);
		}
		if (compiled[0])
			fail_msg("fleet: the second daemon compiled (CONF_VALUE %d):%s",
				 conf_value[v], compiled);
		/* and both serve them from their own caches now */
		assert_int_equal(ctl_all(&pb, v, "hit"), 0);
	}
	set_conf(0);
}

static void test_team(void **state)
{
	(void)state;
	if (!fx.have_users) {
		fprintf(stderr,
			"team: skipped: needs root, setpriv and useradd for a second user\n");
		skip();
	}
	struct jtl_daemon *d = &fx.d[fx.n_d++];
	fx.d_as_user = 1;
	jct_daemon_init(d);
	jct_daemon_start_as(d, fx.daemon_user, fx.group, fx.gid, 1, fx.user, NULL);
	struct ctl_path p = {"team", d->sock, 1};
	three_rounds(&p, d);
}

/* --- the shim ------------------------------------------------------------------------ */

/* "N reached jitcached (H hit, M miss" of a jitcache-run --check report. */
static void shim_counts(const char *report, int *reached, int *hits, int *misses)
{
	const char *r = strstr(report, " reached jitcached (");
	*reached = *hits = *misses = -1;
	if (!r)
		return;
	const char *s = r;
	while (s > report && s[-1] >= '0' && s[-1] <= '9')
		s--;
	*reached = atoi(s);
	sscanf(r, " reached jitcached (%d hit, %d miss", hits, misses);
}

/* In an ASan build (scripts/sanitize.sh) the shim, an ASan library, needs
 * the ASan runtime loaded first in the programs it is preloaded into, as
 * tests/shim/test_shim.sh does; CPython frees nothing at exit, so the
 * ctypes program runs without leak checks. The words before jitcache-run:
 * "LD_PRELOAD=RUNTIME " (python: and the ASAN_OPTIONS), or "". */
static void asan_words(int python, char *out, size_t len)
{
	out[0] = '\0';
#ifdef __SANITIZE_ADDRESS__
	Dl_info info;
	void *init = dlsym(RTLD_DEFAULT, "__asan_init");
	assert_true(init && dladdr(init, &info) && info.dli_fname);
	snprintf(out, len, "LD_PRELOAD=%s %s", info.dli_fname,
		 python ? "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " : "");
#else
	(void)python;
	(void)len;
#endif
}

/* Case i through the shim under the C program (python: the ctypes one)
 * at version v; the report's counts must be want_hits hits and
 * want_misses misses. */
static void shim_case(const struct jtl_daemon *d, int python, int i, int v, int want_hits,
		      int want_misses)
{
	const struct ccase *c = &cases[i];
	char opts[2000], ex[2000], out[600], lib[400] = "", app[1200], asan[700];
	options(c, opts, sizeof(opts));
	exprs(c, "--expr", ex, sizeof(ex));
	asan_words(python, asan, sizeof(asan));
	if (c->dlto)
		snprintf(lib, sizeof(lib), "--lib %s/dlto_lib.cu", fx.cases);
	snprintf(out, sizeof(out), "%s/shim.%s.cubin", fx.out, c->name);
	if (python)
		snprintf(app, sizeof(app), "python3 %s/conformance_app.py %s libnvJitLink.so.%s",
			 env("JC_CONFORMANCE_DIR"), env("JC_NVRTC_SONAME"),
			 strrchr(env("JC_NVRTC_SONAME"), '.') + 1);
	else
		snprintf(app, sizeof(app), "%s", env("JC_CONFORMANCE_APP"));
	remove(out);
	generate();
	char *so, *se;
	int rc =
	    run(0, &so, &se,
		"JITCACHE_SOCKET=%s LD_LIBRARY_PATH=%s %s%s --check %s %s %s -o %s %s/%s.cu %s %s",
		d->sock, env("JC_CUDA_LIBDIR"), asan, env("JITCACHE_RUN_BIN"), app, lib, ex, out,
		fx.cases, c->name, ARCH, opts);
	if (rc != 0)
		fail_msg("shim (%s), %s: exit %d\n%s%s", python ? "ctypes" : "C", c->name, rc, so,
			 se);
	char names[8192];
	app_names(so, names, sizeof(names));
	check_ref(python ? "shim (ctypes)" : "shim (C)", i, v, out, names);
	int reached, hits, misses;
	shim_counts(se, &reached, &hits, &misses);
	if (hits != want_hits || misses != want_misses)
		fail_msg("shim (%s), %s: %d hits and %d misses, wanted %d and %d\n%s",
			 python ? "ctypes" : "C", c->name, hits, misses, want_hits, want_misses,
			 se);
	free(so);
	free(se);
}

static void test_shim(void **state)
{
	(void)state;
	struct jtl_daemon *d = daemon_start(NULL);
	int python = jct_sh("python3 -c 'import ctypes' 2>/dev/null") == 0;
	if (!python)
		fprintf(stderr, "shim: the ctypes program skipped: no python3\n");
	for (int v = 0; v < 2; v++) {
		set_conf(v);
		for (int i = 0; i < N_CASES; i++) {
			int programs = cases[i].dlto ? 2 : 1;
			/* the library of -dlto does not include conf_params.h */
			int misses = v == 0 ? programs : 1;
			shim_case(d, 0, i, v, programs - misses, misses);
			if (python)
				shim_case(d, 1, i, v, programs, 0);
			else
				shim_case(d, 0, i, v, programs, 0);
		}
	}
	set_conf(0);
}

/* --- the GPU --------------------------------------------------------------------------- */

static int gpu_present(char *why, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "no CUDA driver: %s", dlerror());
		return 0;
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	int n = 0, rc = init && count ? init(0) : -1;
	if (rc == 0)
		rc = count(&n);
	snprintf(why, len, "cuInit/cuDeviceGetCount gave %d with %d devices", rc, n);
	return rc == 0 && n > 0;
}

/* Every case through a local daemon, then its conf_check on the GPU. */
static void test_gpu(void **state)
{
	(void)state;
	struct jtl_daemon *d = daemon_start(NULL);
	struct ctl_path p = {"gpu", d->sock, 0};
	set_conf(0);
	for (int i = 0; i < N_CASES; i++) {
		ctl_case(&p, i, 0, "miss");
		char cubin[600];
		snprintf(cubin, sizeof(cubin), "%s/gpu.%s.cubin", fx.out, cases[i].name);
		int expect = cases[i].expect ? cases[i].expect : fx.gen_run;
		char *so, *se;
		int rc = run(0, &so, &se, "%s %s %d %d", env("JC_CONFORMANCE_GPU"), cubin, expect,
			     conf_value[0]);
		printf("gpu %s: %s", cases[i].name, so);
		if (rc != 0)
			fail_msg("gpu, %s: conf_check: exit %d\n%s%s", cases[i].name, rc, so, se);
		free(so);
		free(se);
	}
}

/* --- main ------------------------------------------------------------------------------ */

static void make_users(void)
{
	if (geteuid() != 0 ||
	    jct_sh("command -v setpriv >/dev/null && command -v useradd >/dev/null") != 0)
		return;
	if (jct_group_add("jccg", fx.group, &fx.gid) != 0 ||
	    jct_user_add("jccu", fx.group, fx.user, NULL, NULL) != 0 ||
	    jct_user_add("jccd", fx.group, fx.daemon_user, NULL, NULL) != 0)
		return;
	fx.have_users = 1;
}

int main(int argc, char **argv)
{
	char why[256];
	if (argc == 2 && !strcmp(argv[1], "gpu") && !gpu_present(why, sizeof(why))) {
		fprintf(stderr, "skipped: the GPU part needs a GPU (%s)\n", why);
		return 77;
	}
	jct_tmpdir(fx.root, NULL, "conformance");
	assert_int_equal(chmod(fx.root, 0711), 0);
	snprintf(fx.tree, sizeof(fx.tree), "%s/tree", fx.root);
	snprintf(fx.out, sizeof(fx.out), "%s/out", fx.root);
	snprintf(fx.ref, sizeof(fx.ref), "%s/ref", fx.root);
	snprintf(fx.cases, sizeof(fx.cases), "%s/cases", fx.tree);
	fx.gen_run = (int)(getpid() % 100000) * 10 + 1; /* this run's: the GPU checks it */
	assert_int_equal(
	    jct_sh("mkdir -p %s %s %s && chmod 0777 %s", fx.tree, fx.out, fx.ref, fx.out), 0);
	make_tree();
	make_users();
	if (fx.have_users)
		assert_int_equal(jct_sh("chown -R %s:%s %s", fx.user, fx.group, fx.tree), 0);
	make_refs();
#define T(f) cmocka_unit_test_teardown(f, path_teardown)
	static const struct CMUnitTest paths[] = {
	    T(test_local), T(test_fleet), T(test_team), T(test_shim), T(test_fallback), T(test_gpu),
	};
	static const char *const names[] = {"local", "fleet", "team", "shim", "fallback", "gpu"};
	struct CMUnitTest run_these[6];
	size_t n = 0;
	for (size_t k = 0; k < 6; k++)
		for (int a = 1; a < argc; a++)
			if (!strcmp(argv[a], names[k]) || (!strcmp(argv[a], "all") && k != 5))
				run_these[n++] = paths[k];
	int rc = _cmocka_run_group_tests("conformance", run_these, n, NULL, NULL);
	jct_users_remove();
	if (!getenv("JC_TEST_KEEP"))
		jct_sh("rm -rf %s", fx.root);
	return rc;
}
