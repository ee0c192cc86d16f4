/* SPDX-License-Identifier: MIT */
/*
 * jitcache-bench [--quick] [--json]: starts its own jitcached on a temporary
 * cache and prints the performance figures beside their targets.
 */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "core/confine.h"

static struct bench_daemon daemon_under_test = {.core.pid = -1};
static int keep_dir;

static const struct bench_plan plans[] = {
    {.name = "full",
     .hit_iters = 50000,
     .tput_s = 3,
     .levels = {1, 2, 4, 8, 16},
     .n_levels = 5,
     .scale = {1000, 100000, 1000000},
     .n_scale = 3,
     .scale_iters = 50000,
     .sf_rounds = 11,
     .sf_clients = 64,
     .compile_reps = 3,
     .large = 1,
     .rewarm_entries = 1000},
    {.name = "quick",
     .hit_iters = 10000,
     .tput_s = 1,
     .levels = {1, 2, 4, 8, 16},
     .n_levels = 5,
     .scale = {1000, 100000, 1000000},
     .n_scale = 3,
     .scale_iters = 20000,
     .sf_rounds = 7,
     .sf_clients = 64,
     .compile_reps = 1,
     .large = 1,
     .rewarm_entries = 40},
    /* The smoke test's: every code path, tiny sizes, no CUB compile. */
    {.name = "tiny",
     .hit_iters = 300,
     .tput_s = 0.2,
     .levels = {1, 8},
     .n_levels = 2,
     .scale = {100, 1000},
     .n_scale = 2,
     .scale_iters = 200,
     .sf_rounds = 1,
     .sf_clients = 64,
     .compile_reps = 1,
     .large = 0,
     .rewarm_entries = 4},
};

void bench_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "jitcache-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (daemon_under_test.core.dir[0])
		fprintf(stderr, "jitcache-bench: kept %s (daemon.log inside)\n",
			daemon_under_test.core.dir);
	bench_daemon_cleanup(&daemon_under_test, 1);
	exit(1);
}

static void on_signal(int sig)
{
	if (daemon_under_test.core.pid > 0)
		kill(daemon_under_test.core.pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* --- figures and targets ----------------------------------------------------- */

enum cmp { NONE, AT_MOST, AT_LEAST, EQUAL };

struct figure {
	char name[64]; /* table label */
	char json[40]; /* JSON key */
	double value;
	const char *unit; /* "us", "ms", "x", "hits/s", "" */
	enum cmp cmp;
	double target;
	char note[96];
};

static struct figure figs[128];
static size_t n_figs;

static struct figure *fig(const char *json, const char *unit, double value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static struct figure *fig(const char *json, const char *unit, double value, const char *fmt, ...)
{
	if (n_figs == sizeof(figs) / sizeof(figs[0]))
		bench_die("too many figures");
	struct figure *f = &figs[n_figs++];
	memset(f, 0, sizeof(*f));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->name, sizeof(f->name), fmt, ap);
	va_end(ap);
	snprintf(f->json, sizeof(f->json), "%s", json);
	f->unit = unit;
	f->value = value;
	return f;
}

static void target(struct figure *f, enum cmp c, double t)
{
	f->cmp = c;
	f->target = t;
}

static int met(const struct figure *f)
{
	switch (f->cmp) {
	case AT_MOST:
		return f->value <= f->target;
	case AT_LEAST:
		return f->value >= f->target;
	case EQUAL:
		return f->value == f->target;
	case NONE:
		break;
	}
	return 1;
}

static void fmt_value(char *out, size_t len, double v, const char *unit)
{
	if (strcmp(unit, "x") == 0)
		snprintf(out, len, v >= 100 ? "%.0fx" : "%.2fx", v);
	else if (!*unit)
		snprintf(out, len, "%.0f", v);
	else if (strcmp(unit, "%") == 0)
		snprintf(out, len, v < 1 ? "%.2f %%" : "%.1f %%", v);
	else if (v >= 100 || strcmp(unit, "hits/s") == 0)
		snprintf(out, len, "%.0f %s", v, unit);
	else
		snprintf(out, len, "%.1f %s", v, unit);
}

static void print_table(FILE *f)
{
	static const char *const ops[] = {"", "<=", ">=", "=="};
	int pass = 0, total = 0;
	fprintf(f, "%-44s %14s  %-16s %s\n", "figure", "value", "target", "result");
	for (size_t i = 0; i < n_figs; i++) {
		const struct figure *g = &figs[i];
		char v[32], t[32] = "";
		fmt_value(v, sizeof(v), g->value, g->unit);
		if (g->cmp != NONE) {
			char tv[24];
			fmt_value(tv, sizeof(tv), g->target, g->unit);
			snprintf(t, sizeof(t), "%s %s", ops[g->cmp], tv);
			total++;
			pass += met(g);
		}
		fprintf(f, "%-44s %14s  %-16s %s%s%s\n", g->name, v, t,
			g->cmp == NONE ? ""
			: met(g)       ? "pass"
				       : "FAIL",
			g->note[0] && g->cmp != NONE ? "  " : "", g->note);
	}
	fprintf(f, "%d of %d targets met\n", pass, total);
}

static void print_json(FILE *f, const struct bench_plan *plan, double run_s)
{
	fprintf(f, "{\n  \"mode\": \"%s\",\n  \"cpus\": %ld,\n  \"run_s\": %.1f", plan->name,
		sysconf(_SC_NPROCESSORS_ONLN), run_s);
	for (size_t i = 0; i < n_figs; i++)
		fprintf(f, ",\n  \"%s\": %.3f", figs[i].json, figs[i].value);
	fprintf(f, ",\n  \"targets\": {");
	int first = 1;
	for (size_t i = 0; i < n_figs; i++) {
		if (figs[i].cmp == NONE)
			continue;
		fprintf(f, "%s\n    \"%s\": %s", first ? "" : ",", figs[i].json,
			met(&figs[i]) ? "true" : "false");
		first = 0;
	}
	fprintf(f, "\n  }\n}\n");
}

/* --- the run -------------------------------------------------------------------- */

static const char *examples_dir(void)
{
	const char *e = getenv("JC_EXAMPLES");
	return e && *e ? e : JC_BENCH_EXAMPLES;
}

/* An example's source, NUL-terminated (malloc'd; *size bytes before the NUL). */
static char *example_source(const char *file, size_t *size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", examples_dir(), file);
	FILE *f = fopen(path, "rb");
	char *src = malloc(1 << 16);
	size_t n = f && src ? fread(src, 1, (1 << 16) - 1, f) : 0;
	if (!f || n == 0 || n == (1 << 16) - 1)
		bench_die("cannot read %s (set JC_EXAMPLES)", path);
	fclose(f);
	src[n] = '\0';
	*size = n;
	return src;
}

/* Adds -Idir and declares dir. */
static int include_dir(jc_request *r, const char *dir)
{
	char inc[PATH_MAX + 32];
	snprintf(inc, sizeof(inc), "-I%s", dir);
	return jc_request_add_option(r, inc) ?: jc_request_add_include_dir(r, dir);
}

/* file's request; with cccl (a directory holding cub/), -std=c++17 -Icccl;
 * with ctl, as `jitcachectl compile` sends it: the examples directory (the
 * source's) the first -I. */
static jc_request *example_request(const char *file, const char *expr, const char *cccl, int ctl)
{
	size_t n;
	char *src = example_source(file, &n);
	jc_request *r = NULL;
	int rc = jc_request_new(&r);
	rc = rc ?: jc_request_set_source(r, file, src, n);
	rc = rc ?: jc_request_set_arch(r, "sm_90");
	rc = rc ?: jc_request_add_name_expression(r, expr);
	if (ctl)
		rc = rc ?: include_dir(r, examples_dir());
	if (cccl) {
		rc = rc ?: jc_request_add_option(r, "-std=c++17");
		rc = rc ?: include_dir(r, cccl);
	}
	free(src);
	if (rc != 0)
		bench_die("building the %s request: %s", file, jc_strerror(rc));
	return r;
}

/* A copy of r's key space made fresh: the app ABI string enters the key. */
void bench_freshen(jc_request *r, const char *what, int i)
{
	char abi[96];
	snprintf(abi, sizeof(abi), "jitcache-bench/%s/%d/%ld/%llu", what, i, (long)getpid(),
		 (unsigned long long)jc__now_ns());
	if (jc_request_set_app_abi(r, abi) != 0)
		bench_die("out of memory");
}

/* NVRTC time of compile_reps cold compiles of r (the first is o's). */
static double compile_ms(jc_client *c, jc_request *r, const struct bench_object *o,
			 const struct bench_plan *plan, const char *what)
{
	double v[8];
	int n = 0;
	if (o->was_miss)
		v[n++] = o->compile_ms;
	while (n < plan->compile_reps && n < 8) {
		struct bench_object fresh;
		bench_freshen(r, what, n);
		bench_fetch(c, r, daemon_under_test.core.cache, &fresh);
		v[n++] = fresh.compile_ms;
	}
	jc_request_set_app_abi(r, "");
	return jtl_median(v, n);
}

/* NVRTC time of one result, in milliseconds. */
static double result_compile_ms(jc_client *c, const jc_request *r, jc_cache_status want)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != 0)
		bench_die("fatbin figure: %s: %s", jc_strerror(rc), jc_client_errmsg(c));
	if (jc_result_cache_status(res) != want)
		bench_die("fatbin figure: a %s where a %s was expected",
			  jc_result_cache_status(res) == JC_HIT ? "hit" : "miss",
			  want == JC_HIT ? "hit" : "miss");
	double ms = jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6;
	jc_result_free(res);
	return ms;
}

/* 7. A fatbin of three targets (SAXPY) against its parts: the daemon's
 * build time (parts compiled in parallel by the workers, then put
 * together) beside the sum of the parts' NVRTC times, read from the
 * single-target entries the build made (hits afterwards). The median of
 * compile_reps cold rounds. Skipped where the daemon has no fatbin tool. */
static void fatbin_figures(jc_client *c, const struct bench_plan *plan)
{
	static const char *const parts[] = {"sm_80", "sm_90", "compute_90"};
	double build[8], sum[8], ratio[8];
	int n = 0;
	jc_request *r = example_request("saxpy.cu", "&saxpy<float>", NULL, 0);
	for (; n < plan->compile_reps && n < 8; n++) {
		bench_freshen(r, "fatbin", n);
		jc_request_set_arch(r, "sm_80,sm_90,compute_90");
		jc_result *res = NULL;
		int rc = jc_compile(c, r, &res);
		if (rc == JC_ENOTSUP) {
			fprintf(stderr, "fatbin figures skipped: %s\n", jc_client_errmsg(c));
			jc_request_free(r);
			return;
		}
		if (rc != 0)
			bench_die("fatbin figure: %s: %s", jc_strerror(rc), jc_client_errmsg(c));
		build[n] = jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6;
		jc_result_free(res);
		sum[n] = 0;
		for (int i = 0; i < 3; i++) {
			jc_request_set_arch(r, parts[i]);
			jc_request_set_output(r, i == 2 ? JC_PTX : JC_CUBIN);
			sum[n] += result_compile_ms(c, r, JC_HIT);
		}
		ratio[n] = build[n] / sum[n];
	}
	fig("fatbin_build_ms", "ms", jtl_median(build, n),
	    "fatbin sm_80,sm_90,compute_90 (SAXPY): build");
	fig("fatbin_parts_sum_ms", "ms", jtl_median(sum, n),
	    "  its 3 parts' NVRTC compiles, summed");
	fig("fatbin_build_ratio", "x", jtl_median(ratio, n), "  build / sum of the parts");
	jc_request_free(r);
}

static void hit_figures(const char *tag, const char *label, const struct bench_object *o,
			const struct bench_lat *hit, const struct bench_lat *raw, double ratio_max)
{
	char k[40];
	struct figure *f;
	snprintf(k, sizeof(k), "%s_p50_us", tag);
	f = fig(k, "us", hit->p50, "hit p50, %s (%.1f KiB)", label, (double)o->size / 1024);
	target(f, AT_MOST, 30);
	snprintf(k, sizeof(k), "%s_p99_us", tag);
	target(fig(k, "us", hit->p99, "hit p99, %s", label), AT_MOST, 150);
	snprintf(k, sizeof(k), "%s_p999_us", tag);
	fig(k, "us", hit->p999, "hit p99.9, %s", label);
	snprintf(k, sizeof(k), "raw_read%s_p50_us", tag + 3);
	fig(k, "us", raw->p50, "raw open+read+close p50, %s", label);
	snprintf(k, sizeof(k), "%s_raw_ratio", tag);
	f = fig(k, "x", hit->p50 / raw->p50, "hit p50 / raw p50, %s", label);
	target(f, AT_MOST, ratio_max);
	snprintf(k, sizeof(k), "hash%s_us", tag + 3);
	fig(k, "us", bench_hash_us(o, 2000), "  in it: client's XXH3-128 check, %s", label);
	struct bench_lat reopen, dup;
	bench_reopen_vs_dup(o, 2000, &reopen, &dup);
	snprintf(k, sizeof(k), "reopen%s_us", tag + 3);
	fig(k, "us", reopen.p50, "  in it: daemon's reopen of the object, %s", label);
	snprintf(k, sizeof(k), "dup%s_us", tag + 3);
	fig(k, "us", dup.p50, "  instead of a dup of a kept descriptor, %s", label);
}

/* A remote hit's p50 (us) against its target and against the compile (ms). */
static void remote_hit_figures(const char *tag, const char *label, double p50_us, double value,
			       double compile)
{
	char k[48];
	snprintf(k, sizeof(k), "remote_hit_%s_p50_us", tag);
	target(fig(k, "us", p50_us, "remote hit p50, %s (value %.1f KiB)", label, value / 1024),
	       AT_MOST, 1000);
	snprintf(k, sizeof(k), "remote_hit_%s_pct_compile", tag);
	target(fig(k, "%", 100 * p50_us / 1e3 / compile, "  remote hit / %s compile", label),
	       AT_MOST, 2);
}

/*
 * -I of a CCCL-sized tree outside the toolkit (copy, a settled copy of its
 * cccl/, about 1700 files): the hit of a per-user daemon, which re-checks the tree
 * itself (manifest, hash memo), beside the hit of a client that reads the
 * tree for a daemon of another uid (JITCACHE_SEND_HEADERS=1: its scan with
 * the hash memo, then the hashes sent), same daemon, same request.
 */
static void user_tree_figures(struct bench_daemon *d, jc_client *cl, const char *copy, size_t iters)
{
	fprintf(stderr, "user include tree (%s)...\n", copy);
	jc_request *r = example_request("cub_sort.cu", "&sort_and_sum<128, 8>", copy, 0);
	struct bench_object o;
	struct bench_lat own, sent, raw;
	bench_fetch(cl, r, d->core.cache, &o);
	bench_hits_vs_raw(cl, r, &o, iters, &own, &raw);
	setenv("JITCACHE_SEND_HEADERS", "1", 1);
	jc_client *reader = bench_connect(d);
	unsetenv("JITCACHE_SEND_HEADERS");
	bench_fetch(reader, r, d->core.cache, &o); /* the same key: a hit */
	bench_hits_vs_raw(reader, r, &o, iters, &sent, &raw);
	jc_client_close(reader);
	jc_request_free(r);
	fig("hit_usertree_p50_us", "us", own.p50,
	    "hit p50, CUB with -I a CCCL copy, daemon reads the tree");
	fig("hit_usertree_p99_us", "us", own.p99, "hit p99, same");
	fig("hit_clienttree_p50_us", "us", sent.p50,
	    "hit p50, same, the client reads the tree (system daemon)");
	fig("hit_clienttree_p99_us", "us", sent.p99, "hit p99, same");
}

/* 9. The remote tier, beside d (which has none); saxpy_ms and cub_ms: their
 * compiles, for the ratios. */
static void remote_figures(const struct bench_daemon *d, const struct bench_plan *plan,
			   jc_request *saxpy, jc_request *cub, jc_request *cub_ctl, double saxpy_ms,
			   double cub_ms)
{
	struct figure *f;
	fprintf(stderr, "remote tier...\n");
	struct bench_remote rm;
	bench_remote_run(d, plan, saxpy, cub, cub_ctl, &rm);
	if (!rm.ran) {
		fprintf(stderr, "remote tier: skipped: %s\n", rm.why);
	} else {
		remote_hit_figures("saxpy", "SAXPY", rm.hit_saxpy_p50_us, rm.value_saxpy, saxpy_ms);
		if (cub)
			remote_hit_figures("cub", "CUB", rm.hit_cub_p50_us, rm.value_cub, cub_ms);
		if (rm.learned_ran) {
			f = fig("remote_learned_fresh_ms", "ms", rm.learned_fresh_ms,
				"CUB as jitcachectl sends it (learnt key), fresh daemon: 1st "
				"request p50 of %d",
				rm.learned_fresh_n);
			target(f, AT_MOST, 2);
			f = fig("remote_learned_fresh_pct_compile", "%",
				100 * rm.learned_fresh_ms / rm.learned_compile_ms,
				"  / its compile (%.0f ms)", rm.learned_compile_ms);
			target(f, AT_MOST, 0.2);
			for (int k = 0; k < BENCH_LEARNED_PHASES; k++) {
				char key[40];
				snprintf(key, sizeof(key), "remote_learned_phase%d_ms", k);
				fig(key, "ms", rm.learned_phase_ms[k], "  in it: %s",
				    bench_learned_phases[k][2]);
			}
			f = fig("remote_learned_fresh_compiles", "",
				(double)rm.learned_fresh_compiles,
				"  compiles on those fresh daemons");
			target(f, AT_MOST, 0);
			f = fig("remote_learned_hit_gets", "", (double)rm.learned_hit_gets,
				"Redis GETs during %d local hits of the learnt key",
				rm.learned_hits);
			target(f, AT_MOST, 0);
			fig("remote_learned_hit_p50_us", "us", rm.learned_hit_p50_us,
			    "  its local hit p50, remote up");
			/* Not watched (inotify limits, shared by the machine's
			 * daemons): each hit re-checks its manifest in the pool. */
			fig("remote_learned_hit_walks", "", (double)rm.learned_hit_walks,
			    "  of those hits, keyed by a stat walk");
			f = fig("remote_learned_hit_ratio", "x",
				rm.learned_hit_p50_us / rm.learned_hit_base_p50_us,
				"  / same hit, no remote (%.1f us)", rm.learned_hit_base_p50_us);
			target(f, AT_MOST, 1.1);
		}
		fig("remote_local_hit_p50_us", "us", rm.local_hit_p50_us,
		    "local hit p50, remote up");
		fig("remote_none_hit_p50_us", "us", rm.local_hit_base_p50_us,
		    "local hit p50, no remote");
		f = fig("remote_local_hit_ratio", "x",
			rm.local_hit_p50_us / rm.local_hit_base_p50_us,
			"  local hit: remote up / none");
		target(f, AT_MOST, 1.1);
		f = fig("remote_down_hit_ratio", "x", rm.down_hit_p50_us / rm.down_hit_base_p50_us,
			"hit: Redis down / no remote (%.1f / %.1f us)", rm.down_hit_p50_us,
			rm.down_hit_base_p50_us);
		target(f, AT_MOST, 1.1);
		f = fig("remote_down_miss_ratio", "x", rm.down_miss_ms / rm.down_miss_base_ms,
			"miss: Redis down / no remote (%.1f ms)", rm.down_miss_ms);
		target(f, AT_MOST, 1.1);
		fig("remote_redis_bytes_per_entry", "", rm.redis_bytes_per_entry,
		    "Redis memory per SAXPY value (bytes)");
		fig("remote_hits_per_s", "hits/s", rm.remote_hits_per_s,
		    "remote hits/s, one client, serial (+purge)");
		if (rm.redis_get_per_s > 0)
			fig("remote_redis_get_per_s", "hits/s", rm.redis_get_per_s,
			    "redis-benchmark GET/s of such values, 8 conns");
	}
}
/* What the phases of a run share: the daemon under test, a client of it,
 * the example requests and what their first fetches measured. */
struct run {
	const struct bench_plan *plan;
	struct bench_daemon *d;
	jc_client *cl; /* closed after miss_figures */
	jc_request *small, *saxpy;
	jc_request *cub, *cub_ctl; /* NULL without plan->large */
	char tk_cccl[PATH_MAX];	   /* the toolkit's CCCL */
	struct bench_object o_small, o_saxpy, o_cub;
	double saxpy_ms, cub_ms; /* NVRTC compile times (cub_ms 0 without CUB) */
	struct bench_lat hit_s, raw_s, hit_l, raw_l; /* hits beside raw reads: small, CUB */
};

/* 6. NVRTC compile times (the first requests are the misses). */
static void example_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_client *cl = run->cl;
	const char *cuda = getenv("CUDA_PATH");
	snprintf(run->tk_cccl, sizeof(run->tk_cccl), "%s/include/cccl",
		 cuda && *cuda ? cuda : "/usr/local/cuda");
	run->small = bench_tiny_request(0);
	run->saxpy = example_request("saxpy.cu", "&saxpy<float>", NULL, 0);
	if (plan->large) {
		run->cub = example_request("cub_sort.cu", "&sort_and_sum<128, 8>", run->tk_cccl, 0);
		run->cub_ctl =
		    example_request("cub_sort.cu", "&sort_and_sum<128, 8>", run->tk_cccl, 1);
	}
	fprintf(stderr, "compiling the examples...\n");
	bench_fetch(cl, run->small, d->core.cache, &run->o_small);
	bench_fetch(cl, run->saxpy, d->core.cache, &run->o_saxpy);
	run->saxpy_ms = compile_ms(cl, run->saxpy, &run->o_saxpy, plan, "saxpy");
	if (run->cub) {
		bench_fetch(cl, run->cub, d->core.cache, &run->o_cub);
		run->cub_ms = compile_ms(cl, run->cub, &run->o_cub, plan, "cub");
	}
}

/* 1 + 2. Hit latency beside the raw read, and what no hit can avoid. */
static void hit_latency_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_client *cl = run->cl;
	jc_request *small = run->small;
	jc_request *cub = run->cub;
	char user_cccl[PATH_MAX + 32];
	fprintf(stderr, "hit latency...\n");
	fig("socket_floor_us", "us", bench_socket_floor_us(plan->hit_iters, 1),
	    "floor: Unix socket round trip p50, 2 procs, both poll as a hit's do");
	fig("socket_floor_blocking_us", "us", bench_socket_floor_us(plan->hit_iters, 0),
	    "  the same round trip, both sides blocking");
	bench_hits_vs_raw(cl, small, &run->o_small, plan->hit_iters, &run->hit_s, &run->raw_s);
	hit_figures("hit", "small", &run->o_small, &run->hit_s, &run->raw_s, 3);
	/* The same without the client's poll before it sleeps. */
	struct bench_lat h, r;
	setenv("JITCACHE_CLIENT_SPIN_US", "0", 1);
	jc_client *nospin = bench_connect(d);
	unsetenv("JITCACHE_CLIENT_SPIN_US");
	bench_hits_vs_raw(nospin, small, &run->o_small, plan->hit_iters / 2, &h, &r);
	jc_client_close(nospin);
	fig("hit_nospin_p50_us", "us", h.p50, "  hit p50, small, client never polls");
	if (cub) {
		bench_hits_vs_raw(cl, cub, &run->o_cub, plan->hit_iters, &run->hit_l, &run->raw_l);
		hit_figures("hit_large", "CUB", &run->o_cub, &run->hit_l, &run->raw_l, 2);
		/* The same request with -I a copy of CCCL (as CuPy and others ship
		 * their own): not covered by the toolkit identity, so keyed through
		 * its watched tree (watch.h). */
		char cmd[sizeof(run->tk_cccl) + sizeof(user_cccl) + 16];
		if (snprintf(user_cccl, sizeof(user_cccl), "%s/cccl-copy", d->core.dir) >=
			(int)sizeof(user_cccl) ||
		    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", run->tk_cccl, user_cccl) >=
			(int)sizeof(cmd) ||
		    system(cmd) != 0)
			bench_die("cannot copy %s", run->tk_cccl);
		usleep(2100 * 1000); /* past the settle margin (2 s on whole-second filesystems) */
		jc_request *copy =
		    example_request("cub_sort.cu", "&sort_and_sum<128, 8>", user_cccl, 0);
		struct bench_object o_copy;
		struct bench_lat hit_c, raw_c;
		int64_t trees0 = bench_stat(cl, "include_watch_trees");
		int64_t w0 = bench_stat(cl, "include_watches"),
			b0 = bench_stat(cl, "include_watch_bytes");
		bench_fetch(cl, copy, d->core.cache, &o_copy);
		bench_hits_vs_raw(cl, copy, &o_copy, plan->hit_iters, &hit_c, &raw_c);
		fig("hit_cccl_copy_p50_us", "us", hit_c.p50,
		    "hit p50, CUB with -I a 1.7k-file CCCL copy");
		fig("hit_cccl_copy_p99_us", "us", hit_c.p99, "hit p99, CUB with -I a CCCL copy");
		struct figure *f = fig("hit_cccl_copy_ratio", "x", hit_c.p50 / run->hit_l.p50,
				       "hit p50, CCCL copy / toolkit CCCL");
		target(f, AT_MOST, 1.5);
		int64_t trees = bench_stat(cl, "include_watch_trees") - trees0;
		int64_t w = bench_stat(cl, "include_watches") - w0;
		fig("cccl_copy_watches", "", (double)w,
		    "inotify watches for the CCCL copy (%lld trees)", (long long)trees);
		fig("cccl_copy_watch_kib", "KiB",
		    (double)(bench_stat(cl, "include_watch_bytes") - b0) / 1024,
		    "  daemon memory for them (kernel: about 1 KiB more per watch)");
		fig("cccl_copy_stat_walks", "", (double)bench_stat(cl, "include_tree_stat_walks"),
		    "  requests keyed by a stat walk (of %zu)", plan->hit_iters + 1);
		jc_request_free(copy);
		user_tree_figures(d, cl, user_cccl, plan->hit_iters / 4);
	}
}

/* 7. A hit from Python (jitcache.Client.compile) beside the C client's. */
static void python_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_client *cl = run->cl;
	jc_request *saxpy = run->saxpy;
	struct bench_lat py, c_hit;
	char why[640], src[PATH_MAX];
	snprintf(src, sizeof(src), "%s/saxpy.cu", examples_dir());
	size_t n = plan->hit_iters / 5 > 100 ? plan->hit_iters / 5 : 100;
	fprintf(stderr, "hits from Python...\n");
	if (bench_python_hits(d, cl, saxpy, &run->o_saxpy, src, "saxpy.cu", "sm_90",
			      "&saxpy<float>", n, &py, &c_hit, why, sizeof(why)) == 0) {
		fig("c_hit_saxpy_p50_us", "us", c_hit.p50, "hit p50, SAXPY, C jc_compile");
		fig("python_hit_p50_us", "us", py.p50, "hit p50, SAXPY, Python client.compile");
		struct figure *pf = fig("python_c_hit_ratio", "x", py.p50 / c_hit.p50,
					"  Python hit p50 / C hit p50");
		target(pf, AT_MOST, 3);
	} else {
		fprintf(stderr, "jitcache-bench: Python hits not measured: %s\n", why);
	}
}

/* The client library's paths: connect, a reconnect, the fallback. */
static void client_path_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_request *small = run->small;
	jc_request *saxpy = run->saxpy;
	fprintf(stderr, "client paths...\n");
	struct bench_lat conn;
	size_t iters = plan->hit_iters / 10 > 200 ? plan->hit_iters / 10 : 200;
	bench_connect_us(d, iters, &conn);
	target(fig("connect_p50_us", "us", conn.p50, "connect + handshake p50"), AT_MOST, 50);
	fig("connect_p99_us", "us", conn.p99, "connect + handshake p99");
	fig("reconnect_hit_p50_us", "us", bench_reconnect_hit_us(d, small, iters / 2),
	    "hit on a broken connection: reconnect + resend, p50");
	struct bench_lat fe, fc, fh, fs;
	char src[PATH_MAX];
	snprintf(src, sizeof(src), "%s/saxpy.cu", examples_dir());
	bench_fresh_process(d, src, "&saxpy<float>",
			    plan->hit_iters / 500 > 10 ? plan->hit_iters / 500 : 10, &fe, &fc, &fh,
			    &fs);
	fig("fresh_exec_p50_us", "us", fe.p50, "fresh process: fork + exec to main, p50");
	fig("fresh_connect_p50_us", "us", fc.p50, "fresh process: connect + handshake, p50");
	fig("fresh_first_hit_p50_us", "us", fh.p50,
	    "fresh process: first request (SAXPY hit), p50");
	fig("fresh_first_hit_server_p50_us", "us", fs.p50, "  in it: the daemon's time, p50");
	fig("fresh_ready_p50_us", "us", fc.p50 + fh.p50,
	    "fresh process: connect p50 + first hit p50");
	double first, fb, plain;
	bench_fallback_ms(d, saxpy, plan->compile_reps + 4, &first, &fb, &plain);
	fig("fallback_first_saxpy_ms", "ms", first,
	    "no daemon: first in-process compile (loads NVRTC)");
	fig("fallback_saxpy_ms", "ms", fb, "no daemon: in-process compile, SAXPY");
	fig("nvrtc_plain_saxpy_ms", "ms", plain, "plain NVRTC compile, SAXPY, same process");
	target(fig("fallback_plain_ratio", "x", fb / plain, "in-process fallback / plain NVRTC"),
	       AT_MOST, 1.1);
}

/* 3. Throughput, and its scaling with the CPUs: one client process
 * per CPU against one. */
static void throughput_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_request *small = run->small;
	fprintf(stderr, "throughput...\n");
	int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), levels[6];
	size_t n_levels = plan->n_levels, at_cpus = n_levels;
	memcpy(levels, plan->levels, n_levels * sizeof(levels[0]));
	for (size_t i = 0; i < n_levels; i++)
		at_cpus = levels[i] == cpus ? i : at_cpus;
	if (at_cpus == n_levels && cpus > 1 && plan->n_levels > 1)
		levels[n_levels++] = cpus;
	double tput[6];
	for (size_t i = 0; i < n_levels; i++) {
		int p = levels[i];
		double v = tput[i] = bench_throughput(d, small, p, plan->tput_s);
		char k[32];
		snprintf(k, sizeof(k), p == 8 ? "hits_per_s" : "hits_per_s_%d", p);
		struct figure *f =
		    fig(k, "hits/s", v, "throughput, %d client process%s", p, p == 1 ? "" : "es");
		if (p == 8)
			target(f, AT_LEAST, 40000);
	}
	for (size_t i = 1; i < n_levels; i++)
		if (levels[i] == cpus && levels[0] == 1)
			target(fig("hits_scaling_x", "x", tput[i] / tput[0],
				   "throughput, %d processes (one per CPU) / 1", cpus),
			       AT_LEAST, cpus / 2.0);
}

/* 4. Single flight, against one compile alone (fresh keys each round). */
static void single_flight_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_client *cl = run->cl;
	jc_request *saxpy = run->saxpy;
	fprintf(stderr, "single flight...\n");
	double alone[16], wall[16], ratio[16];
	int64_t max_compiles = 0;
	for (int i = 0; i < plan->sf_rounds && i < 16; i++) {
		struct bench_object o;
		bench_freshen(saxpy, "alone", i);
		bench_fetch(cl, saxpy, d->core.cache, &o);
		alone[i] = o.miss_ms;
		int64_t compiles;
		bench_freshen(saxpy, "flight", i);
		bench_single_flight(d, saxpy, plan->sf_clients, &compiles, &wall[i]);
		if (compiles > max_compiles || i == 0)
			max_compiles = compiles;
		ratio[i] = wall[i] / alone[i];
	}
	struct figure *f;
	f = fig("single_flight_compiles", "", (double)max_compiles,
		"single flight: compiles, %d cold clients", plan->sf_clients);
	target(f, EQUAL, 1);
	double m_wall = jtl_median(wall, plan->sf_rounds),
	       m_alone = jtl_median(alone, plan->sf_rounds);
	fig("single_flight_wall_ms", "ms", m_wall, "single flight: wall, %d clients",
	    plan->sf_clients);
	fig("one_compile_ms", "ms", m_alone, "one SAXPY miss alone (client wall)");
	f = fig("single_flight_ratio", "x", jtl_median(ratio, plan->sf_rounds),
		"single flight: wall / one compile");
	target(f, AT_MOST, 1.2);
}

/* 6, on the same page: what a miss costs against a hit. */
static void miss_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	jc_client *cl = run->cl;
	jc_request *cub = run->cub;
	fig("compile_saxpy_ms", "ms", run->saxpy_ms, "NVRTC compile, SAXPY (%.1f KiB)",
	    (double)run->o_saxpy.size / 1024);
	fig("miss_hit_ratio_saxpy", "x", run->saxpy_ms * 1e3 / run->hit_s.p50,
	    "SAXPY compile / small hit p50");
	if (cub) {
		fig("compile_cub_ms", "ms", run->cub_ms, "NVRTC compile, CUB sort (%.1f KiB)",
		    (double)run->o_cub.size / 1024);
		fig("miss_hit_ratio_cub", "x", run->cub_ms * 1e3 / run->hit_l.p50,
		    "CUB compile / CUB hit p50");
	}
	fatbin_figures(cl, plan);
}

/* 7. What confinement and the record of NVRTC's file accesses cost: a
 * SAXPY miss (fresh keys) and a small hit, under each kind this kernel
 * offers, side by side (restarts the daemon for each). */
static void confinement_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	jc_request *small = run->small;
	jc_request *saxpy = run->saxpy;
	fprintf(stderr, "confinement...\n");
	int abi;
	char why[128];
	int best = jc__confine_detect(&abi, why, sizeof(why));
	for (int kind = JC_CONFINE_NONE; kind <= JC_CONFINE_USERNS; kind++) {
		if (kind != JC_CONFINE_NONE && kind != best &&
		    !(kind == JC_CONFINE_USERNS && best == JC_CONFINE_LANDLOCK))
			continue;
		const char *name = jc__confine_name(kind);
		bench_daemon_stop(d);
		d->confinement = name;
		bench_daemon_start(d);
		jc_client *cc = bench_connect(d);
		struct bench_object o;
		double miss[16];
		int reps = plan->sf_rounds < 16 ? plan->sf_rounds : 16;
		for (int i = 0; i < reps; i++) {
			bench_freshen(saxpy, name, i);
			bench_fetch(cc, saxpy, d->core.cache, &o);
			miss[i] = o.miss_ms;
		}
		struct bench_lat h, r;
		bench_fetch(cc, small, d->core.cache, &run->o_small);
		bench_hits_vs_raw(cc, small, &run->o_small, plan->hit_iters / 2, &h, &r);
		jc_client_close(cc);
		char k[48];
		snprintf(k, sizeof(k), "confine_%s_miss_ms", name);
		fig(k, "ms", jtl_median(miss, reps), "SAXPY miss, confinement %s%s", name,
		    kind == best ? " (default)" : "");
		snprintf(k, sizeof(k), "confine_%s_hit_p50_us", name);
		fig(k, "us", h.p50, "  small hit p50, confinement %s", name);
	}
	bench_daemon_stop(d);
	d->confinement = NULL;
	bench_daemon_start(d);
}

/* 8. The NVRTC shim: a SAXPY hit through libjitcache-nvrtc against the
 * real NVRTC compile of the same program, and a forwarded call. */
static void shim_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	fprintf(stderr, "NVRTC shim...\n");
	size_t n;
	char *src = example_source("saxpy.cu", &n);
	struct bench_shim sh;
	bench_shim(d, plan, src, &sh);
	free(src);
	struct figure *f =
	    fig("shim_hit_p50_us", "us", sh.hit.p50, "shim: SAXPY create+compile+CUBIN, hit p50");
	target(f, AT_MOST, 100);
	fig("shim_hit_p99_us", "us", sh.hit.p99, "shim: SAXPY hit p99");
	fig("shim_real_compile_ms", "ms", sh.real_compile_ms,
	    "shim: real NVRTC compile, same program");
	f = fig("shim_compile_hit_ratio", "x", sh.real_compile_ms * 1e3 / sh.hit.p50,
		"shim: real compile / shim hit p50");
	target(f, AT_LEAST, 300);
	fig("shim_version_ns", "ns", sh.version_shim_ns, "shim: nvrtcVersion through the shim");
	f = fig("shim_forward_overhead_ns", "ns", sh.version_shim_ns - sh.version_real_ns,
		"shim: cost on a forwarded call (vs real)");
	target(f, AT_MOST, 1000);
}

/* 10. Re-warm after a toolchain change, and what keeping requests costs
 * (daemons of its own). */
static void rewarm_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	jc_request *saxpy = run->saxpy;
	fprintf(stderr, "re-warm...\n");
	struct bench_rewarm rw;
	bench_rewarm_run(plan, saxpy, &rw);
	fig("rewarm_per_entry_ms", "ms", rw.per_entry_ms,
	    "re-warm: one SAXPY entry, 1 worker (%zu re-warmed)", rw.entries);
	/* per entry (ms) x 1,000 = seconds */
	fig("rewarm_1000_s", "s", rw.entries == 1000 ? rw.total_s : rw.per_entry_ms,
	    "re-warm: the 1,000 most used SAXPY entries%s",
	    rw.entries == 1000 ? "" : " (per entry x 1,000)");
	fig("rewarm_cpu_per_entry_ms", "ms", rw.cpu_s * 1e3 / (double)rw.entries,
	    "re-warm: CPU time per entry");
	fig("rewarm_request_zstd_bytes", "", rw.zstd_bytes,
	    "kept request after zstd, SAXPY (bytes)");
	fig("rewarm_extra_store_bytes", "", rw.extra_bytes,
	    "store bytes/entry, kept - not (%zu entries, %zu compiled)", rw.store_entries,
	    rw.entries);
	struct figure *f = fig("rewarm_extra_store_ratio", "x", rw.extra_bytes / rw.zstd_bytes,
			       "  extra store bytes / request after zstd");
	target(f, AT_MOST, 1.1);
	fig("rewarm_miss_idle_ms", "ms", rw.miss_idle_ms, "client miss, idle daemon (median)");
	fig("rewarm_miss_during_ms", "ms", rw.miss_rewarm_ms,
	    "client miss during a re-warm (median)");
	f = fig("rewarm_miss_ratio", "x", rw.miss_rewarm_ms / rw.miss_idle_ms,
		"  client miss: during re-warm / idle");
	target(f, AT_MOST, 1.2);
}

/* 5. Scale (restarts the daemon). */
static void scale_figures(struct run *run)
{
	const struct bench_plan *plan = run->plan;
	struct bench_daemon *d = run->d;
	fprintf(stderr, "scale...\n");
	struct bench_scale sc[3];
	bench_scale_run(d, plan, sc);
	for (size_t i = 0; i < plan->n_scale; i++) {
		char k[40], label[16];
		size_t n = sc[i].entries;
		if (n >= 1000000)
			snprintf(label, sizeof(label), "%zuM", n / 1000000);
		else if (n >= 1000)
			snprintf(label, sizeof(label), "%zuk", n / 1000);
		else
			snprintf(label, sizeof(label), "%zu", n);
		snprintf(k, sizeof(k), "scale_%zu_hit_p50_us", n);
		struct figure *f =
		    fig(k, "us", sc[i].hit_p50_us, "%s entries: hit p50 (1000 hot keys)", label);
		if (i == plan->n_scale - 1 && i > 0) {
			target(f, AT_MOST, 1.3 * sc[0].hit_p50_us);
			snprintf(f->note, sizeof(f->note), "(1.3x the %zu-entry figure)",
				 sc[0].entries);
		}
		snprintf(k, sizeof(k), "scale_%zu_spread_p50_us", n);
		fig(k, "us", sc[i].spread_p50_us, "%s entries: hit p50 (keys drawn from all)",
		    label);
		snprintf(k, sizeof(k), "scale_%zu_ready_ms", n);
		f = fig(k, "ms", sc[i].ready_ms, "%s entries: daemon ready after restart", label);
		target(f, AT_MOST, 300);
		snprintf(k, sizeof(k), "scale_%zu_first_hit_us", n);
		fig(k, "us", sc[i].first_hit_us, "%s entries: first hit after restart", label);
		snprintf(k, sizeof(k), "scale_%zu_insert_s", n);
		fig(k, "s", sc[i].insert_s, "%s entries: bulk insert (not a target)", label);
	}
}

/* Last: a fresh machine's first request (no daemon, empty cache). */
static void autostart_figures(struct run *run)
{
	double open_ms, ms = bench_autostart_ms(run->d, run->small, &open_ms);
	fig("autostart_ready_ms", "ms", open_ms, "no daemon: auto-start until the handshake");
	fig("autostart_first_request_ms", "ms", ms, "no daemon: first request (auto-start + miss)");
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: jitcache-bench [--quick] [--json] [--remote-only]\n"
	    "  --quick  fewer iterations and shorter runs (same figures; under 4 minutes)\n"
	    "  --json   figures as JSON on stdout (the table goes to stderr)\n"
	    "  --tiny   a seconds-long run of every path, for the smoke test (figures are noise)\n"
	    "  --keep   keep the temporary cache directory\n"
	    "  --remote-only  only the examples' compiles and the remote tier's figures\n"
	    "Environment: JITCACHED (daemon binary), JC_EXAMPLES (examples/), CUDA_PATH,\n"
	    "  JC_PYTHON (the Python for the Python hit figure; default python3).\n");
}
int main(int argc, char **argv)
{
	int mode = 0, json = 0, remote_only = 0, c; /* mode: index into plans[] */
	const struct option opts[] = {
	    {"quick", no_argument, &mode, 1},
	    {"tiny", no_argument, &mode, 2},
	    {"json", no_argument, &json, 1},
	    {"keep", no_argument, &keep_dir, 1},
	    {"remote-only", no_argument, &remote_only, 1},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 0)
			continue; /* a flag set through opts */
		usage(c == 'h' ? stdout : stderr);
		return c == 'h' ? 0 : 2;
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	struct run run = {.plan = &plans[mode], .d = &daemon_under_test};
	const struct bench_plan *plan = run.plan;
	struct bench_daemon *d = run.d;
	FILE *table = json ? stderr : stdout;
	uint64_t t_start = jc__now_ns();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	bench_daemon_init(d);
	fprintf(stderr, "jitcache-bench (%s): %ld CPUs, daemon %s, cache %s\n", plan->name,
		sysconf(_SC_NPROCESSORS_ONLN), d->core.bin, d->core.cache);
	bench_daemon_start(d);
	run.cl = bench_connect(d);
	example_figures(&run);
	if (remote_only) {
		jc_client_close(run.cl);
		remote_figures(d, plan, run.saxpy, run.cub, run.cub_ctl, run.saxpy_ms, run.cub_ms);
		bench_daemon_stop(d);
	} else {
		hit_latency_figures(&run);
		python_figures(&run);
		client_path_figures(&run);
		throughput_figures(&run);
		single_flight_figures(&run);
		miss_figures(&run);
		jc_client_close(run.cl);
		confinement_figures(&run);
		shim_figures(&run);
		remote_figures(d, plan, run.saxpy, run.cub, run.cub_ctl, run.saxpy_ms, run.cub_ms);
		rewarm_figures(&run);
		scale_figures(&run);
		bench_daemon_stop(d);
		autostart_figures(&run);
	}
	bench_daemon_cleanup(d, keep_dir);

	double run_s = (double)(jc__now_ns() - t_start) / 1e9;
	print_table(table);
	fprintf(table, "mode %s, %.0f s; medians on a shared machine: compare the ratios\n",
		plan->name, run_s);
	if (json)
		print_json(stdout, plan, run_s);
	jc_request_free(run.small);
	jc_request_free(run.saxpy);
	jc_request_free(run.cub);
	jc_request_free(run.cub_ctl);
	return 0;
}
