/* SPDX-License-Identifier: MIT */
/*
 * The remote tier's figures: a redis-server of the benchmark's own on a Unix
 * socket, a writer daemon W and a reader daemon R on it, and the local-only
 * daemon of the rest of the run beside them, measured in turns:
 *   - remote hit on R (a local miss: fetch, verify, local publish, serve),
 *     R's entry purged before each, for SAXPY and CUB;
 *   - local hits on R (remote configured) against the local-only daemon;
 *   - Redis killed, R's back-off tripped: hits and cold compiles on R against
 *     the local-only daemon;
 *   - what Redis holds per value (used_memory growth), and its GET rate for
 *     values of that size (redis-benchmark, when installed).
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client/client_internal.h"

static struct bench_daemon writer = {.core.pid = -1}, reader = {.core.pid = -1};
static pid_t redis_pid = -1;
static char redis_sock[PATH_MAX + 16];

static void stop_all(void)
{
	bench_daemon_cleanup(&writer, 0);
	bench_daemon_cleanup(&reader, 0);
	if (redis_pid > 0) {
		kill(redis_pid, SIGKILL);
		waitpid(redis_pid, NULL, 0);
		redis_pid = -1;
	}
}

static redisContext *redis_connect(void)
{
	struct timeval tv = {2, 0};
	redisContext *c = redisConnectUnixWithTimeout(redis_sock, tv);
	if (c && c->err) {
		redisFree(c);
		return NULL;
	}
	return c;
}

/* An integer field of INFO (0 when absent). */
static long long redis_info(const char *field)
{
	redisContext *c = redis_connect();
	redisReply *r = c ? redisCommand(c, "INFO") : NULL;
	long long v = 0;
	char pat[64];
	snprintf(pat, sizeof(pat), "\r\n%s:", field);
	const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, pat) : NULL;
	if (p)
		v = atoll(p + strlen(pat));
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return v;
}

static int start_redis(const char *dir)
{
	snprintf(redis_sock, sizeof(redis_sock), "%s/redis.sock", dir);
	char log[PATH_MAX + 16];
	snprintf(log, sizeof(log), "%s/redis.log", dir);
	pid_t pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", redis_sock,
		       "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log,
		       "--maxmemory-policy", "allkeys-lru", (char *)NULL);
		_exit(127);
	}
	redis_pid = pid;
	for (int i = 0; i < 400; i++) {
		redisContext *c = redis_connect();
		if (c) {
			redisFree(c);
			return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			redis_pid = -1;
			return -1;
		}
		usleep(25000);
	}
	return -1;
}

static void purge_key(jc_client *c, const char *key)
{
	char arg[40];
	snprintf(arg, sizeof(arg), "key=%s", key);
	char *args[] = {arg};
	struct jc_admin_req req = {.command = (char *)"purge", .args = {.v = args, .n = 1}};
	struct jc_admin_reply reply = {0};
	if (jc__client_admin(c, &req, &reply) != 0 || reply.status != 0)
		bench_die("purge %s: %s", key, jc_client_errmsg(c));
	jc__admin_reply_clear(&reply);
}

/* Waits until c's daemon has stored key (a remote hit is stored after it is
 * served), so that a purge finds it. */
static void wait_row(jc_client *c, const char *key)
{
	char arg[40];
	snprintf(arg, sizeof(arg), "key=%s", key);
	char *args[] = {arg};
	struct jc_admin_req req = {.command = (char *)"show", .args = {.v = args, .n = 1}};
	for (int i = 0; i < 1000; i++) {
		struct jc_admin_reply reply = {0};
		int rc = jc__client_admin(c, &req, &reply);
		int found = rc == 0 && reply.status == 0;
		jc__admin_reply_clear(&reply);
		if (rc != 0)
			bench_die("show %s: %s", key, jc_client_errmsg(c));
		if (found)
			return;
		usleep(1000);
	}
	bench_die("a remote hit was not stored locally within 1 s (see %s)", reader.core.log);
}

/* Waits until W has published n values. */
static void wait_publishes(jc_client *w, int64_t n)
{
	for (int i = 0; i < 2000 && bench_stat(w, "remote_publishes") < n; i++)
		usleep(5000);
	if (bench_stat(w, "remote_publishes") < n)
		bench_die("the writer daemon did not publish to Redis (see %s)", writer.core.log);
}

/* p50 of iters remote hits of r on R (purged before each); the value's size. */
static double remote_hits(jc_client *w, jc_client *rc, jc_request *r, size_t iters, double *value)
{
	struct bench_object o;
	int64_t pub = bench_stat(w, "remote_publishes"), out = bench_stat(w, "remote_bytes_out");
	bench_fetch(w, r, writer.core.cache, &o);
	wait_publishes(w, pub + 1);
	*value = (double)(bench_stat(w, "remote_bytes_out") - out);
	uint64_t *ns = malloc(iters * sizeof(*ns));
	if (!ns)
		bench_die("out of memory");
	int64_t hits = bench_stat(rc, "remote_hits"), compiles = bench_stat(rc, "compiles");
	for (size_t i = 0; i < iters; i++) {
		purge_key(rc, o.key);
		ns[i] = bench_timed_request(rc, r, JC_REMOTE_HIT, o.size);
		wait_row(rc, o.key);
	}
	if (bench_stat(rc, "remote_hits") - hits != (int64_t)iters ||
	    bench_stat(rc, "compiles") != compiles)
		bench_die("the reader compiled instead of taking Redis's value (see %s)",
			  reader.core.log);
	struct bench_lat l;
	bench_lat_of(ns, iters, &l);
	free(ns);
	return l.p50;
}

/* Hit p50 of r on a and on b, interleaved in blocks. */
static void hits_side_by_side(jc_client *a, jc_client *b, jc_request *r, size_t size, size_t iters,
			      double *pa, double *pb)
{
	uint64_t *ta = malloc(iters * sizeof(*ta)), *tb = malloc(iters * sizeof(*tb));
	if (!ta || !tb)
		bench_die("out of memory");
	for (size_t i = 0; i < 100; i++) {
		bench_timed_request(a, r, JC_HIT, size);
		bench_timed_request(b, r, JC_HIT, size);
	}
	for (size_t i = 0; i < iters; i += 50)
		for (size_t j = i; j < i + 50 && j < iters; j++) {
			ta[j] = bench_timed_request(a, r, JC_HIT, size);
			tb[j] = bench_timed_request(b, r, JC_HIT, size);
		}
	struct bench_lat la, lb;
	bench_lat_of(ta, iters, &la);
	bench_lat_of(tb, iters, &lb);
	*pa = la.p50;
	*pb = lb.p50;
	free(ta);
	free(tb);
}

/* Median cold compile (client wall, ms) of fresh tiny kernels on a and on b, in turns. */
static void misses_side_by_side(jc_client *a, jc_client *b, int n, double *ma, double *mb)
{
	uint64_t ta[32], tb[32];
	for (int i = 0; i < n && i < 32; i++) {
		for (int side = 0; side < 2; side++) {
			jc_request *r = bench_tiny_request(jc__now_ns() ^ (uint64_t)(i * 2 + side));
			jc_result *res = NULL;
			uint64_t t0 = jc__now_ns();
			if (jc_compile(side ? b : a, r, &res) != 0 ||
			    jc_result_cache_status(res) != JC_MISS)
				bench_die("a cold compile failed");
			(side ? tb : ta)[i] = jc__now_ns() - t0;
			jc_result_free(res);
			jc_request_free(r);
		}
	}
	jtl_sort_u64(ta, (size_t)n);
	jtl_sort_u64(tb, (size_t)n);
	*ma = (double)ta[n / 2] / 1e6;
	*mb = (double)tb[n / 2] / 1e6;
}

/* GET commands the server has run (INFO commandstats). */
static long long redis_gets(void)
{
	redisContext *c = redis_connect();
	redisReply *r = c ? redisCommand(c, "INFO commandstats") : NULL;
	const char *p =
	    r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_get:calls=") : NULL;
	long long v = p ? atoll(p + strlen("cmdstat_get:calls=")) : 0;
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return v;
}

const char *const bench_learned_phases[BENCH_LEARNED_PHASES][3] = {
    {"keyed in", "keyed in ", "keyed (scan, record, its check)"},
    {"keyed in", "pool wait ", "  pool hand-off before the scan"},
    {"keyed in", "scan ", "  include scan"},
    {"keyed in", "record fetch ", "  record fetch (beside the above)"},
    {"keyed in", "(pool wait ", "  record check: wait for the pool"},
    {"keyed in", "record check ", "  record check (open, admit, stat)"},
    {"value fetched", "value fetched in ", "value: asked until checked"},
    {"value fetched", "GET ", "  value GET"},
    {"value fetched", "pool wait ", "  pool hand-off"},
    {"value fetched", "decode and checks ", "  value decode and checks"},
};

/* The number after label in the first line of text holding tag, or -1. */
static double log_number(const char *text, const char *tag, const char *label)
{
	const char *line = strstr(text, tag);
	if (!line)
		return -1;
	while (line > text && line[-1] != '\n')
		line--;
	const char *end = strchr(line, '\n');
	const char *at = strstr(line, label);
	return at && (!end || at < end) ? atof(at + strlen(label)) : -1;
}

/* The phases of a fresh daemon's first request, from its info log, into
 * ms[BENCH_LEARNED_PHASES] (dies when a line is missing). */
static void learned_phases(const struct bench_daemon *f, double *ms)
{
	FILE *fp = fopen(f->core.log, "r");
	static char text[1 << 20];
	size_t n = fp ? fread(text, 1, sizeof(text) - 1, fp) : 0;
	if (fp)
		fclose(fp);
	text[n] = 0;
	for (int i = 0; i < BENCH_LEARNED_PHASES; i++)
		if ((ms[i] = log_number(text, bench_learned_phases[i][0],
					bench_learned_phases[i][1])) < 0)
			bench_die("no \"%s\" line with \"%s\" in %s", bench_learned_phases[i][0],
				  bench_learned_phases[i][1], f->core.log);
}

/*
 * The learnt key in the fleet (dependency records): W compiles r (the CUB
 * example as jitcachectl sends it: NVRTC probes headers next to the source
 * that the scan does not predict, so the key is learnt and its record
 * published); then n fresh daemons on the same Redis, each with an empty
 * cache directory, ask once (timed: scan, record, re-check, value, verify,
 * serve). On the last one, local hits of r (keyed from the manifest the
 * record left) run beside local's (no remote) while Redis's GET count is
 * watched: a learnt key costs a local hit no round trip.
 */
static void learned_figures(jc_client *wc, const struct bench_daemon *local, jc_client *lc,
			    jc_request *r, const char *url, int n, size_t iters,
			    struct bench_remote *out)
{
	struct bench_object o, ol;
	int64_t deps = bench_stat(wc, "remote_deps_published");
	int64_t pub = bench_stat(wc, "remote_publishes");
	bench_fetch(wc, r, writer.core.cache, &o);
	out->learned_compile_ms = o.compile_ms;
	wait_publishes(wc, pub + 1);
	for (int i = 0; i < 2000 && bench_stat(wc, "remote_deps_published") <= deps; i++)
		usleep(5000);
	if (bench_stat(wc, "remote_deps_published") <= deps)
		bench_die("the writer published no dependency record for the CUB example (see %s)",
			  writer.core.log);
	bench_fetch(lc, r, local->core.cache, &ol);
	if (ol.size != o.size || strcmp(ol.key, o.key) != 0)
		bench_die(
		    "the CUB example as jitcachectl sends it: key %s, %zu bytes on the writer; "
		    "key %s, %zu bytes on the daemon without a remote tier",
		    o.key, o.size, ol.key, ol.size);
	uint64_t ns[16];
	double phase[BENCH_LEARNED_PHASES][16];
	n = n > 16 ? 16 : n;
	for (int i = 0; i < n; i++) {
		struct bench_daemon f = {.core.pid = -1};
		bench_daemon_init(&f);
		f.extra[0] = "--remote";
		f.extra[1] = url;
		f.extra[2] = "--remote-unsigned"; /* its own Redis: nobody else writes */
		f.extra[3] = "--log-level";	  /* the phases of its first request */
		f.extra[4] = "info";
		bench_daemon_start(&f);
		jc_client *fc = bench_connect(&f);
		/* Its workers load NVRTC just after it is ready: let them, so that
		 * the figure is the request's path, not start-up's CPU. */
		jtl_sleep_ms(1500);
		ns[i] = bench_timed_request(fc, r, JC_REMOTE_HIT, o.size);
		out->learned_fresh_compiles += bench_stat(fc, "compiles");
		if (bench_stat(fc, "remote_deps_used") != 1)
			bench_die("a fresh daemon did not use the dependency record (see %s)",
				  f.core.log);
		double ms[BENCH_LEARNED_PHASES];
		wait_row(fc, o.key); /* its log lines are written by then */
		learned_phases(&f, ms);
		for (int k = 0; k < BENCH_LEARNED_PHASES; k++)
			phase[k][i] = ms[k];
		if (i == n - 1) {
			bench_timed_request(fc, r, JC_HIT, o.size);
			long long gets = redis_gets();
			int64_t walks = bench_stat(fc, "include_tree_stat_walks");
			out->learned_hits = (int)iters;
			hits_side_by_side(fc, lc, r, o.size, iters, &out->learned_hit_p50_us,
					  &out->learned_hit_base_p50_us);
			out->learned_hit_gets = redis_gets() - gets;
			out->learned_hit_walks = bench_stat(fc, "include_tree_stat_walks") - walks;
		}
		jc_client_close(fc);
		bench_daemon_stop(&f);
		bench_daemon_cleanup(&f, 0);
	}
	jtl_sort_u64(ns, (size_t)n);
	out->learned_fresh_ms = (double)ns[n / 2] / 1e6;
	for (int k = 0; k < BENCH_LEARNED_PHASES; k++)
		out->learned_phase_ms[k] = jtl_median(phase[k], (size_t)n);
	out->learned_fresh_n = n;
	out->learned_ran = 1;
}

/* GET requests/s redis-benchmark reaches on our socket for values of size bytes. */
static double redis_benchmark(size_t size, int quick)
{
	char cmd[PATH_MAX + 256];
	snprintf(cmd, sizeof(cmd),
		 "redis-benchmark -s '%s' -t get -d %zu -n %d -c 8 -q 2>/dev/null", redis_sock,
		 size, quick ? 5000 : 50000);
	FILE *p = popen(cmd, "r");
	char line[512];
	double rps = 0;
	/* Progress lines end in '\r', the result ("GET: N requests per second")
	 * comes last on the same line. */
	while (p && fgets(line, sizeof(line), p)) {
		for (const char *g = line; (g = strstr(g, "GET: ")); g += 5)
			if (strstr(g, "requests per second"))
				rps = atof(g + 5);
	}
	if (p)
		pclose(p);
	return rps;
}

void bench_remote_run(const struct bench_daemon *local, const struct bench_plan *plan,
		      jc_request *saxpy, jc_request *cub, jc_request *cub_ctl,
		      struct bench_remote *out)
{
	memset(out, 0, sizeof(*out));
	if (system("command -v redis-server >/dev/null 2>&1") != 0) {
		snprintf(out->why, sizeof(out->why),
			 "redis-server not found (scripts/setup.sh installs it)");
		return;
	}
	atexit(stop_all);
	if (start_redis(local->core.dir) != 0)
		bench_die("redis-server did not start (see %s/redis.log)", local->core.dir);
	char url[PATH_MAX + 32];
	snprintf(url, sizeof(url), "redis+unix://%s", redis_sock);
	struct bench_daemon *w = &writer, *r = &reader;
	bench_daemon_init(w);
	bench_daemon_init(r);
	w->extra[0] = r->extra[0] = "--remote";
	w->extra[1] = r->extra[1] = url;
	w->extra[2] = r->extra[2] = "--remote-unsigned"; /* its own Redis: nobody else writes */
	bench_daemon_start(w);
	bench_daemon_start(r);
	jc_client *wc = bench_connect(w), *rc = bench_connect(r), *lc = bench_connect(local);
	size_t iters = plan->hit_iters / 50 < 20 ? 20 : plan->hit_iters / 50;

	/* What one value costs Redis: SAXPY values under fresh keys. */
	long long mem0 = redis_info("used_memory");
	int64_t pub = bench_stat(wc, "remote_publishes");
	int n_fill = 50;
	for (int i = 0; i < n_fill; i++) {
		char abi[64];
		snprintf(abi, sizeof(abi), "bench-remote-fill/%d/%ld", i, (long)getpid());
		jc_request_set_app_abi(saxpy, abi);
		struct bench_object o;
		bench_fetch(wc, saxpy, w->core.cache, &o);
	}
	jc_request_set_app_abi(saxpy, "");
	wait_publishes(wc, pub + n_fill);
	out->redis_bytes_per_entry = (double)(redis_info("used_memory") - mem0) / n_fill;

	uint64_t t0 = jc__now_ns();
	out->hit_saxpy_p50_us = remote_hits(wc, rc, saxpy, iters, &out->value_saxpy);
	out->remote_hits_per_s = (double)iters / ((double)(jc__now_ns() - t0) / 1e9);
	if (cub)
		out->hit_cub_p50_us = remote_hits(wc, rc, cub, iters, &out->value_cub);
	out->redis_get_per_s = redis_benchmark((size_t)out->value_saxpy, plan->hit_iters < 50000);
	if (cub_ctl)
		learned_figures(wc, local, lc, cub_ctl, url, plan->hit_iters < 1000 ? 3 : 7,
				iters * 10, out);

	/* Local hits with the tier up, against no tier at all. */
	jc_request *small = bench_tiny_request(0);
	struct bench_object os;
	bench_fetch(lc, small, local->core.cache, &os);
	bench_fetch(rc, small, r->core.cache, &os);
	hits_side_by_side(rc, lc, small, os.size, plan->hit_iters / 2, &out->local_hit_p50_us,
			  &out->local_hit_base_p50_us);

	/* Redis gone: trip the back-off (a few misses), then the same again. */
	kill(redis_pid, SIGKILL);
	waitpid(redis_pid, NULL, 0);
	redis_pid = -1;
	double m1, m2;
	misses_side_by_side(rc, lc, 3, &m1, &m2);
	for (int i = 0; i < 200 && bench_stat(rc, "remote_errors") < 3; i++)
		usleep(10000);
	hits_side_by_side(rc, lc, small, os.size, plan->hit_iters / 2, &out->down_hit_p50_us,
			  &out->down_hit_base_p50_us);
	misses_side_by_side(rc, lc, plan->hit_iters < 1000 ? 3 : 9, &out->down_miss_ms,
			    &out->down_miss_base_ms);
	jc_request_free(small);
	jc_client_close(wc);
	jc_client_close(rc);
	jc_client_close(lc);
	bench_daemon_stop(w);
	bench_daemon_stop(r);
	stop_all();
	out->ran = 1;
}
