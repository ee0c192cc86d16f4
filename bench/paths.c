/* SPDX-License-Identifier: MIT */
/*
 * What the client library's other paths cost (jitcache.h, "Finding a
 * daemon"): connect + handshake, a hit that first mends a broken
 * connection, the first request with no daemon running (auto-start), and
 * the in-process fallback beside a plain NVRTC compile of the same request.
 */
#include <errno.h>
#include <nvrtc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "client/client_internal.h"

static double ms_since(uint64_t t0)
{
	return (double)(jc__now_ns() - t0) / 1e6;
}

double bench_connect_us(const struct bench_daemon *d, size_t iters, struct bench_lat *out)
{
	uint64_t *ns = malloc(iters * sizeof(*ns));
	if (!ns)
		bench_die("out of memory");
	for (size_t i = 0; i < iters; i++) {
		jc_client *c = NULL;
		uint64_t t0 = jc__now_ns();
		if (jc_client_connect(d->core.sock, &c) != 0)
			bench_die("connect: %s", jc_client_errmsg(NULL));
		ns[i] = jc__now_ns() - t0;
		jc_client_close(c);
	}
	bench_lat_of(ns, iters, out);
	free(ns);
	return out->p50;
}

void bench_fresh_process(const struct bench_daemon *d, const char *src_path, const char *expr,
			 size_t n, struct bench_lat *exec, struct bench_lat *connect,
			 struct bench_lat *hit, struct bench_lat *server)
{
	const char *bin = getenv("JC_FRESH_HIT");
	struct bench_lat *lat[4] = {exec, connect, hit, server};
	uint64_t *t[4];
	char scratch[PATH_MAX + 16], t0[32];
	for (int i = 0; i < 4; i++)
		if (!(t[i] = malloc(n * sizeof(uint64_t))))
			bench_die("out of memory");
	snprintf(scratch, sizeof(scratch), "%s/fresh", d->core.dir);
	if (mkdir(scratch, 0700) != 0 && errno != EEXIST)
		bench_die("mkdir %s: %s", scratch, strerror(errno));
	for (size_t i = 0; i < n; i++) {
		char *out = NULL, *err = NULL;
		snprintf(t0, sizeof(t0), "%llu", (unsigned long long)jc__now_ns());
		const char *argv[] = {
		    bin && *bin ? bin : JC_BENCH_FRESH_HIT, d->core.sock, src_path, expr, t0, NULL};
		int rc = jtl_run(argv, NULL, scratch, &out, &err);
		double us[4];
		if (rc != 0 || !out ||
		    sscanf(out, "fresh exec_us=%lf connect_us=%lf hit_us=%lf server_us=%lf", &us[0],
			   &us[1], &us[2], &us[3]) != 4)
			bench_die("%s: exit %d: %s%s", argv[0], rc, out ? out : "", err ? err : "");
		for (int k = 0; k < 4; k++)
			t[k][i] = (uint64_t)(us[k] * 1e3);
		free(out);
		free(err);
	}
	for (int k = 0; k < 4; k++) {
		bench_lat_of(t[k], n, lat[k]);
		free(t[k]);
	}
}

double bench_reconnect_hit_us(const struct bench_daemon *d, const jc_request *r, size_t iters)
{
	uint64_t *ns = malloc(iters * sizeof(*ns));
	jc_client *c = bench_connect(d);
	if (!ns)
		bench_die("out of memory");
	for (size_t i = 0; i < iters; i++) {
		jc_result *res = NULL;
		/* What an --idle-timeout close or a daemon restart leaves: a
		 * connection that no longer carries anything. */
		shutdown(jc__client_fd(c), SHUT_RDWR);
		uint64_t t0 = jc__now_ns();
		int rc = jc_compile(c, r, &res);
		ns[i] = jc__now_ns() - t0;
		if (rc != 0 || jc_result_cache_status(res) != JC_HIT)
			bench_die("hit after a broken connection: %s", jc_client_errmsg(c));
		jc_result_free(res);
	}
	jc_client_close(c);
	struct bench_lat lat;
	bench_lat_of(ns, iters, &lat);
	free(ns);
	return lat.p50;
}

double bench_autostart_ms(const struct bench_daemon *d, const jc_request *r, double *open_ms)
{
	char dir[PATH_MAX + 32], sock[PATH_MAX + 48];
	snprintf(dir, sizeof(dir), "%s/autostart", d->core.dir);
	snprintf(sock, sizeof(sock), "%s/autostart/jitcached.sock", d->core.dir);
	setenv("JITCACHED", d->core.bin, 1);
	jc_options *o;
	jc_client *c = NULL;
	jc_result *res = NULL;
	if (jc_options_new(&o) != 0 || jc_options_set_cache_dir(o, dir) != 0 ||
	    jc_options_set_autostart(o, 1) != 0 ||
	    jc_options_set_fallback(o, JC_FALLBACK_ERROR) != 0)
		bench_die("out of memory");
	uint64_t t0 = jc__now_ns();
	if (jc_client_open(o, &c) != 0)
		bench_die("auto-start: %s", jc_client_errmsg(NULL));
	*open_ms = ms_since(t0);
	if (jc_compile(c, r, &res) != 0 || jc_result_cache_status(res) != JC_MISS)
		bench_die("first request after auto-start: %s", jc_client_errmsg(c));
	double ms = ms_since(t0);
	pid_t pid = (pid_t)jc__client_daemon_pid(c);
	jc_result_free(res);
	jc_client_close(c);
	jc_options_free(o);
	if (pid > 0)
		kill(pid, SIGTERM); /* the daemon this run started */
	/* Gone before the run goes on (and removes its directory under it). */
	for (int i = 0; i < 1000 && (pid > 0 ? kill(pid, 0) == 0 : access(sock, F_OK) == 0); i++)
		usleep(10000);
	return ms;
}

/* A plain NVRTC compile of r (its source, options, name expressions, arch). */
static double plain_nvrtc_ms(const jc_request *r)
{
	const struct jc_req *q = &r->req;
	char *src = malloc(q->source_size + 1), arch[64];
	const char **opts = calloc(q->options.n + 1, sizeof(*opts));
	nvrtcProgram prog;
	if (!src || !opts)
		bench_die("out of memory");
	memcpy(src, q->source, q->source_size);
	src[q->source_size] = '\0';
	for (size_t i = 0; i < q->options.n; i++)
		opts[i] = q->options.v[i];
	snprintf(arch, sizeof(arch), "--gpu-architecture=%s", q->arch);
	opts[q->options.n] = arch;
	uint64_t t0 = jc__now_ns();
	if (nvrtcCreateProgram(&prog, src, q->source_name, 0, NULL, NULL) != NVRTC_SUCCESS)
		bench_die("nvrtcCreateProgram failed");
	for (size_t i = 0; i < q->name_exprs.n; i++)
		nvrtcAddNameExpression(prog, q->name_exprs.v[i]);
	if (nvrtcCompileProgram(prog, (int)q->options.n + 1, opts) != NVRTC_SUCCESS)
		bench_die("plain NVRTC compile failed");
	size_t size;
	nvrtcGetCUBINSize(prog, &size);
	char *cubin = malloc(size);
	nvrtcGetCUBIN(prog, cubin);
	for (size_t i = 0; i < q->name_exprs.n; i++) {
		const char *lowered;
		nvrtcGetLoweredName(prog, q->name_exprs.v[i], &lowered);
	}
	double ms = ms_since(t0);
	nvrtcDestroyProgram(&prog);
	free(cubin);
	free(src);
	free(opts);
	return ms;
}

void bench_fallback_ms(const struct bench_daemon *d, const jc_request *r, int reps,
		       double *fallback_first, double *fallback, double *plain)
{
	char nothing[PATH_MAX + 32];
	double f[8], p[8];
	jc_options *o;
	jc_client *c = NULL;
	snprintf(nothing, sizeof(nothing), "%s/no-daemon.sock", d->core.dir);
	if (jc_options_new(&o) != 0 || jc_options_set_socket(o, nothing) != 0 ||
	    jc_options_set_fallback(o, JC_FALLBACK_COMPILE) != 0 || jc_client_open(o, &c) != 0)
		bench_die("fallback client: %s", jc_client_errmsg(NULL));
	if (reps > 8)
		reps = 8;
	for (int i = 0; i <= reps; i++) {
		jc_result *res = NULL;
		uint64_t t0 = jc__now_ns();
		if (jc_compile(c, r, &res) != 0 || jc_result_cache_status(res) != JC_UNCACHED)
			bench_die("in-process fallback: %s", jc_client_errmsg(c));
		double ms = ms_since(t0);
		jc_result_free(res);
		if (i == 0)
			*fallback_first = ms; /* with loading NVRTC and nvJitLink */
		else
			f[i - 1] = ms;
		if (i > 0)
			p[i - 1] = plain_nvrtc_ms(r);
	}
	*fallback = jtl_median(f, reps);
	*plain = jtl_median(p, reps);
	jc_client_close(c);
	jc_options_free(o);
}
