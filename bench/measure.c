/* SPDX-License-Identifier: MIT */
/*
 * The measurements against a running daemon: warm hit latency beside the
 * raw read of the same object file, throughput of several client processes,
 * and single flight of many cold clients on one key.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"

/* Nearest-rank percentile of sorted v[0..n). */
static double pct_us(const uint64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n);
	return (double)v[i < n ? i : n - 1] / 1e3;
}

void bench_lat_of(uint64_t *ns, size_t n, struct bench_lat *out)
{
	if (!n)
		bench_die("no samples");
	jtl_sort_u64(ns, n);
	out->p50 = pct_us(ns, n, 0.50);
	out->p99 = pct_us(ns, n, 0.99);
	out->p999 = pct_us(ns, n, 0.999);
}

/* One request through c that must be answered with the artifact. */
static jc_result *must_compile(jc_client *c, const jc_request *r)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != 0)
		bench_die("compile: %s%s%s", jc_client_errmsg(c), res ? "\n" : "",
			  res ? jc_result_log(res) : "");
	return res;
}

void bench_fetch(jc_client *c, const jc_request *r, const char *cache, struct bench_object *o)
{
	uint64_t t0 = jc__now_ns();
	jc_result *res = must_compile(c, r);
	o->miss_ms = (double)(jc__now_ns() - t0) / 1e6;
	size_t size;
	const void *data = jc_result_data(res, &size);
	XXH128_canonical_t h;
	char hex[33];
	XXH128_canonicalFromHash(&h, XXH3_128bits(data, size));
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", h.digest[i]);
	o->size = size;
	snprintf(o->path, sizeof(o->path), "%s/objects/%.2s/%s", cache, hex, hex);
	snprintf(o->key, sizeof(o->key), "%s", jc_result_key(res));
	o->compile_ms = (double)jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6;
	o->was_miss = jc_result_cache_status(res) == JC_MISS;
	jc_result_free(res);
	struct stat st;
	if (stat(o->path, &st) != 0 || (size_t)st.st_size != size)
		bench_die("object %s is not where the store keeps it", o->path);
}

uint64_t bench_timed_request(jc_client *c, const jc_request *r, jc_cache_status want, size_t size)
{
	uint64_t t0 = jc__now_ns();
	jc_result *res = must_compile(c, r);
	size_t got;
	jc_result_data(res, &got);
	jc_cache_status st = jc_result_cache_status(res);
	uint64_t t = jc__now_ns() - t0;
	if (st != want || got != size)
		bench_die("expected status %d with %zu bytes, got status %d, %zu bytes (key %s)",
			  (int)want, size, (int)st, got, jc_result_key(res));
	jc_result_free(res);
	return t;
}

/* open + read + close of path into buf (size bytes), timed. */
static uint64_t timed_raw(const char *path, uint8_t *buf, size_t size)
{
	uint64_t t0 = jc__now_ns();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("open %s: %s", path, strerror(errno));
	size_t off = 0;
	while (off < size) {
		ssize_t n = read(fd, buf + off, size - off);
		if (n <= 0)
			bench_die("read %s: %s", path, n ? strerror(errno) : "short file");
		off += (size_t)n;
	}
	close(fd);
	return jc__now_ns() - t0;
}

void bench_hits_vs_raw(jc_client *c, const jc_request *r, const struct bench_object *o,
		       size_t iters, struct bench_lat *hit, struct bench_lat *raw)
{
	uint64_t *th = malloc(iters * sizeof(*th)), *tr = malloc(iters * sizeof(*tr));
	uint8_t *buf = malloc(o->size);
	if (!th || !tr || !buf)
		bench_die("out of memory");
	for (size_t i = 0; i < 200; i++) { /* warm both paths */
		bench_timed_request(c, r, JC_HIT, o->size);
		timed_raw(o->path, buf, o->size);
	}
	/* Interleaved in blocks, so that both see the same machine. */
	for (size_t i = 0; i < iters;) {
		size_t end = i + 50 < iters ? i + 50 : iters;
		for (size_t j = i; j < end; j++)
			th[j] = bench_timed_request(c, r, JC_HIT, o->size);
		for (size_t j = i; j < end; j++)
			tr[j] = timed_raw(o->path, buf, o->size);
		i = end;
	}
	bench_lat_of(th, iters, hit);
	bench_lat_of(tr, iters, raw);
	free(th);
	free(tr);
	free(buf);
}

/* One way of getting a descriptor of an object to send, timed: the
 * daemon's reopen (openat "ab/<hash>" under objects/ without following
 * links, fstat, close) or the dup of a kept descriptor it replaced (fcntl
 * F_DUPFD_CLOEXEC, fstat, close). */
static uint64_t timed_reopen(int objdir, const char *name, int kept)
{
	struct stat st;
	uint64_t t0 = jc__now_ns();
	int fd = kept >= 0 ? fcntl(kept, F_DUPFD_CLOEXEC, 0)
			   : openat(objdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) != 0)
		bench_die("descriptor of %s: %s", name, strerror(errno));
	close(fd);
	return jc__now_ns() - t0;
}

void bench_reopen_vs_dup(const struct bench_object *o, size_t iters, struct bench_lat *reopen,
			 struct bench_lat *dup)
{
	char dir[sizeof(o->path)];
	snprintf(dir, sizeof(dir), "%s", o->path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		bench_die("object path %s", o->path);
	for (*slash = '\0'; slash > dir && slash[-1] != '/'; slash--)
		;
	const char *name = o->path + (slash - dir); /* "ab/<hash>" */
	slash[-1] = '\0';			    /* DIR/objects */
	int objdir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
	    kept = open(o->path, O_RDONLY | O_CLOEXEC);
	uint64_t *tr = malloc(iters * sizeof(*tr)), *td = malloc(iters * sizeof(*td));
	if (objdir < 0 || kept < 0 || !tr || !td)
		bench_die("open %s: %s", o->path, strerror(errno));
	for (size_t i = 0; i < 200; i++) {
		timed_reopen(objdir, name, -1);
		timed_reopen(objdir, name, kept);
	}
	for (size_t i = 0; i < iters;) {
		size_t end = i + 50 < iters ? i + 50 : iters;
		for (size_t j = i; j < end; j++)
			tr[j] = timed_reopen(objdir, name, -1);
		for (size_t j = i; j < end; j++)
			td[j] = timed_reopen(objdir, name, kept);
		i = end;
	}
	bench_lat_of(tr, iters, reopen);
	bench_lat_of(td, iters, dup);
	close(kept);
	close(objdir);
	free(tr);
	free(td);
}

/* Polls fd for readable bytes (a peek) for up to spin_ns, yielding the CPU
 * between polls, as the client (client.c, spin_for_answer) and the daemon's
 * serving threads (server.c, poll_awhile) do before they sleep. */
static void spin_readable(int fd, uint64_t spin_ns)
{
	uint64_t t0 = jc__now_ns();
	char b;
	while (spin_ns && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN &&
	       jc__now_ns() - t0 < spin_ns)
		sched_yield();
}

double bench_socket_floor_us(size_t iters, int polling)
{
	/* The client's and the daemon's default polling time (50 us). */
	const uint64_t spin_ns = polling ? 50000 : 0;
	int sv[2];
	char b[64] = {0};
	uint64_t *ns = malloc(iters * sizeof(*ns));
	if (!ns || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		bench_die("socketpair: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) { /* echo until EOF */
		close(sv[0]);
		for (;;) {
			spin_readable(sv[1], spin_ns);
			if (read(sv[1], b, sizeof(b)) != (ssize_t)sizeof(b) ||
			    write(sv[1], b, sizeof(b)) != (ssize_t)sizeof(b))
				break;
		}
		_exit(0);
	}
	close(sv[1]);
	for (size_t i = 0; i < iters; i++) {
		uint64_t t0 = jc__now_ns();
		if (write(sv[0], b, sizeof(b)) != (ssize_t)sizeof(b))
			bench_die("socket round trip: %s", strerror(errno));
		spin_readable(sv[0], spin_ns);
		if (read(sv[0], b, sizeof(b)) != (ssize_t)sizeof(b))
			bench_die("socket round trip: %s", strerror(errno));
		ns[i] = jc__now_ns() - t0;
	}
	close(sv[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	struct bench_lat lat;
	bench_lat_of(ns, iters, &lat);
	free(ns);
	return lat.p50;
}

double bench_hash_us(const struct bench_object *o, size_t iters)
{
	uint8_t *buf = malloc(o->size);
	uint64_t *ns = malloc(iters * sizeof(*ns));
	volatile uint64_t sink = 0;
	if (!buf || !ns)
		bench_die("out of memory");
	timed_raw(o->path, buf, o->size);
	for (size_t i = 0; i < iters; i++) {
		uint64_t t0 = jc__now_ns();
		sink += XXH3_128bits(buf, o->size).low64;
		ns[i] = jc__now_ns() - t0;
	}
	(void)sink;
	struct bench_lat lat;
	bench_lat_of(ns, iters, &lat);
	free(ns);
	free(buf);
	return lat.p50;
}

/* --- client processes -------------------------------------------------------- */

struct child_report {
	uint64_t count;	  /* hits (throughput) or 1 (single flight) */
	uint64_t span_ns; /* throughput: time the child hit for */
	uint64_t done_ns; /* single flight: CLOCK_MONOTONIC of the answer */
	int32_t cache;	  /* single flight: jc_cache_status of the answer */
	int32_t rc;	  /* 0, or the JC_E* code that stopped the child */
};

typedef void (*child_fn)(jc_client *c, const jc_request *r, double secs, struct child_report *rep);

static void write_report(int fd, const struct child_report *rep)
{
	if (write(fd, rep, sizeof(*rep)) != (ssize_t)sizeof(*rep))
		_exit(3);
}

/*
 * Forks n clients; each connects, says it is ready, waits for the start
 * (the parent closes the go pipe), runs fn, writes its report and waits for
 * the end (so that no process exits while others are still measured).
 * Returns the start time; reports go to reps[0..n).
 */
static uint64_t run_children(const struct bench_daemon *d, const jc_request *r, int n, double secs,
			     child_fn fn, struct child_report *reps)
{
	int ready[2], go[2], out[2], end[2];
	if (pipe(ready) || pipe(go) || pipe(out) || pipe(end))
		bench_die("pipe: %s", strerror(errno));
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid == 0) {
			close(ready[0]);
			close(go[1]);
			close(out[0]);
			close(end[1]);
			jc_client *c = NULL;
			struct child_report rep = {0};
			char b = 0;
			rep.rc = jc_client_connect(d->core.sock, &c);
			if (write(ready[1], &b, 1) != 1)
				_exit(3);
			if (read(go[0], &b, 1) < 0) /* EOF: start */
				_exit(3);
			if (rep.rc == 0)
				fn(c, r, secs, &rep);
			write_report(out[1], &rep);
			if (read(end[0], &b, 1) < 0) /* EOF: done */
				_exit(3);
			jc_client_close(c);
			_exit(0);
		}
	}
	close(ready[1]);
	close(go[0]);
	close(out[1]);
	close(end[0]);
	for (int i = 0; i < n; i++) {
		char b;
		if (read(ready[0], &b, 1) != 1)
			bench_die("a client process died before it was ready");
	}
	uint64_t t0 = jc__now_ns();
	close(go[1]);
	for (int i = 0; i < n; i++) {
		size_t got = 0;
		while (got < sizeof(reps[i])) {
			ssize_t k = read(out[0], (char *)&reps[i] + got, sizeof(reps[i]) - got);
			if (k <= 0)
				bench_die("a client process died before it reported");
			got += (size_t)k;
		}
	}
	close(ready[0]);
	close(out[0]);
	close(end[1]);
	for (int i = 0; i < n; i++) {
		int status;
		while (wait(&status) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < n; i++)
		if (reps[i].rc != 0)
			bench_die("a client failed: %s", jc_strerror(reps[i].rc));
	return t0;
}

static void hit_loop(jc_client *c, const jc_request *r, double secs, struct child_report *rep)
{
	uint64_t t0 = jc__now_ns(), end = t0 + (uint64_t)(secs * 1e9), now = t0;
	while (now < end) {
		jc_result *res = NULL;
		int rc = jc_compile(c, r, &res);
		if (rc == 0 && jc_result_cache_status(res) != JC_HIT)
			rc = JC_EINTERNAL;
		jc_result_free(res);
		if (rc != 0) {
			rep->rc = rc;
			return;
		}
		rep->count++;
		now = jc__now_ns();
	}
	rep->span_ns = now - t0;
}

double bench_throughput(const struct bench_daemon *d, const jc_request *r, int procs, double secs)
{
	struct child_report reps[64];
	if (procs > 64)
		bench_die("at most 64 processes");
	run_children(d, r, procs, secs, hit_loop, reps);
	double per_s = 0;
	for (int i = 0; i < procs; i++)
		per_s += (double)reps[i].count / ((double)reps[i].span_ns / 1e9);
	return per_s;
}

static void one_request(jc_client *c, const jc_request *r, double secs, struct child_report *rep)
{
	jc_result *res = NULL;
	(void)secs;
	rep->rc = jc_compile(c, r, &res);
	rep->done_ns = jc__now_ns();
	if (rep->rc == 0)
		rep->cache = (int32_t)jc_result_cache_status(res);
	rep->count = 1;
	jc_result_free(res);
}

void bench_single_flight(const struct bench_daemon *d, const jc_request *r, int clients,
			 int64_t *compiles, double *wall_ms)
{
	struct child_report *reps = calloc((size_t)clients, sizeof(*reps));
	jc_client *c = bench_connect(d);
	if (!reps)
		bench_die("out of memory");
	int64_t before = bench_stat(c, "compiles");
	uint64_t t0 = run_children(d, r, clients, 0, one_request, reps);
	uint64_t last = t0;
	for (int i = 0; i < clients; i++)
		if (reps[i].done_ns > last)
			last = reps[i].done_ns;
	*compiles = bench_stat(c, "compiles") - before;
	*wall_ms = (double)(last - t0) / 1e6;
	jc_client_close(c);
	free(reps);
}
