/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of multi-architecture requests (fatbin.h): one part
 * request per target on an internal connection, the parts' bytes checked in
 * the thread pool, then nvFatbin in a worker or fatbinary through uv_spawn.
 * Loop thread unless a comment says otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/util.h"
#include "core/fatbin.h"
#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "jitcache/jitcache.h"

/* What fatbinary prints that is kept for the message. */
#define TOOL_LOG_MAX 2048

struct part {
	struct jc_fatbin *fb;
	char target[JC_TARGET_LEN];
	struct jc_conn *conn; /* internal; our reference */
	/* Its answer: a copy of the result (data: a compile's bytes, or a hit's,
	 * read from fd in the thread pool; fd: a hit's object descriptor until
	 * then), or status and message alone for an error. */
	struct jc_res res;
	int memfd; /* its bytes for fatbinary; -1 */
};

struct jc_fatbin {
	struct jc_daemon *d;
	struct jc_flight *f;	       /* NULL once the flight has ended */
	const struct jc_toolchain *tc; /* the flight's key's: its fatbin tool */
	int refs;		       /* the flight's, a thread-pool job's, each open handle's */
	int starting;		       /* jc__fatbin_start is still asking for parts */
	size_t n, pending;
	struct part parts[JC_TARGETS_MAX];
	uint64_t t0, t_parts, t_check;
	uint64_t t_tool_start, t_tool; /* the assembly step; t_tool 0 until known */
	struct jc_req job;	       /* the nvFatbin worker job */
	uv_work_t work;
	int rc;
	char err[512];
	uv_process_t proc;
	uv_timer_t timer;
	int out_fd, log_fd; /* fatbinary's output and its stdout/stderr; -1 */
	int timed_out;
};

static void fb_unref(struct jc_fatbin *fb)
{
	if (--fb->refs > 0)
		return;
	for (size_t i = 0; i < fb->n; i++) {
		struct part *p = &fb->parts[i];
		if (p->conn)
			fb->d->request.conn_ops->unref(p->conn);
		jc__res_clear(&p->res);
		if (p->memfd >= 0)
			close(p->memfd);
	}
	if (fb->out_fd >= 0)
		close(fb->out_fd);
	if (fb->log_fd >= 0)
		close(fb->log_fd);
	jc__req_clear(&fb->job);
	free(fb);
}

/* Frees what fatbin_start made (the flight's end: jc_fatbin_ops.free). */
static void fatbin_free(struct jc_fatbin *fb)
{
	fb->f = NULL;
	fb_unref(fb);
}

/* Ends the flight with status and message (printf-style). */
static void fail(struct jc_fatbin *fb, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct jc_fatbin *fb, int status, const char *fmt, ...)
{
	struct jc_flight *f = fb->f;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jc__flight_fail(fb->d, f, status, msg);
}

/* --- assembling ------------------------------------------------------------ */

static void tool_handle_closed(uv_handle_t *h)
{
	fb_unref(h->data);
}

/* First bytes of what fatbinary printed, for a message. */
static void tool_output(struct jc_fatbin *fb, char *buf, size_t len)
{
	ssize_t n = fb->log_fd >= 0 ? pread(fb->log_fd, buf, len - 1, 0) : -1;
	buf[n > 0 ? n : 0] = '\0';
	for (char *c = buf; *c; c++)
		if (*c == '\n' && c[1])
			*c = ' ';
}

static void tool_exit_cb(uv_process_t *proc, int64_t status, int signal)
{
	struct jc_fatbin *fb = proc->data;
	struct jc_flight *f = fb->f;
	const char *tool = fb->tc->fatbin_path;
	char out[TOOL_LOG_MAX];
	struct stat st = {0};
	uv_timer_stop(&fb->timer);
	uv_close((uv_handle_t *)&fb->timer, tool_handle_closed);
	uv_close((uv_handle_t *)&fb->proc, tool_handle_closed);
	fb->t_tool = jc__now_ns() - fb->t_tool_start;
	tool_output(fb, out, sizeof(out));
	if (fb->timed_out) {
		fail(fb, JC_ETIMEOUT,
		     "%s ran past --compile-timeout (%d s); killed, nothing cached", tool,
		     fb->d->cfg.compile_timeout_s);
	} else if (signal || status) {
		fail(fb, JC_EINTERNAL, "%s failed (exit status %lld, signal %d): %s", tool,
		     (long long)status, signal, out[0] ? out : "no output");
	} else if (fstat(fb->out_fd, &st) != 0 || st.st_size <= 0 ||
		   (uint64_t)st.st_size > JC_FRAME_MAX) {
		fail(fb, JC_EINTERNAL, "%s made no usable fatbin (%lld bytes): %s", tool,
		     (long long)st.st_size, out[0] ? out : "no output");
	} else {
		jc__res_clear(&f->res);
		/* A memory file: reading it does not wait on a disk. */
		f->res.data = malloc((size_t)st.st_size);
		if (!f->res.data) {
			fail(fb, JC_ENOMEM, "out of memory for a %lld-byte fatbin",
			     (long long)st.st_size);
		} else if (pread(fb->out_fd, f->res.data, (size_t)st.st_size, 0) != st.st_size) {
			fail(fb, JC_EIO, "reading %s's output: %s", tool, strerror(errno));
		} else {
			f->res.size = (size_t)st.st_size;
			f->res.output = JC_OUTPUT_FATBIN;
			jc__flight_done(fb->d, f);
		}
	}
}

static void tool_timeout_cb(uv_timer_t *t)
{
	struct jc_fatbin *fb = t->data;
	jc_log_warn(WORKER, "fatbinary past %d s, killing pid %d", fb->d->cfg.compile_timeout_s,
		    fb->proc.pid);
	fb->timed_out = 1;
	uv_process_kill(&fb->proc, SIGKILL);
}

/*
 * fatbinary -64 --compress=false --create=/proc/self/fd/OUT
 *   --image3=kind=elf|ptx,sm=NN[a|f],file=/proc/self/fd/K ...
 * The child gets stdin closed, stdout and stderr on a memory file, the
 * parts' memory files on 3.., its output on 3 + n; no shell, an environment
 * of TMPDIR (the store's tmp/) and LC_ALL=C only.
 */
static void run_fatbinary(struct jc_fatbin *fb)
{
	struct jc_daemon *d = fb->d;
	char *args[JC_TARGETS_MAX + 6], create[64], image[JC_TARGETS_MAX][96], tmpdir[4200];
	uv_stdio_container_t stdio[JC_TARGETS_MAX + 4];
	size_t na = 0, ns = 0;
	args[na++] = (char *)fb->tc->fatbin_path;
	args[na++] = (char *)"-64";
	args[na++] = (char *)"--compress=false";
	snprintf(create, sizeof(create), "--create=/proc/self/fd/%zu", 3 + fb->n);
	args[na++] = create;
	stdio[ns++] = (uv_stdio_container_t){.flags = UV_IGNORE};
	stdio[ns++] = (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = fb->log_fd};
	stdio[ns++] = (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = fb->log_fd};
	for (size_t i = 0; i < fb->n; i++) {
		const char *t = fb->parts[i].target;
		int ptx = jc__target_output(t) == JC_OUTPUT_PTX;
		snprintf(image[i], sizeof(image[i]),
			 "--image3=kind=%s,sm=%s,file=/proc/self/fd/%zu", ptx ? "ptx" : "elf",
			 t + (ptx ? 8 : 3), 3 + i);
		args[na++] = image[i];
		stdio[ns++] =
		    (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = fb->parts[i].memfd};
	}
	stdio[ns++] = (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = fb->out_fd};
	args[na] = NULL;
	jc__cachedir_tmp_check(d->cache); /* a failure is logged; fatbinary then says its own */
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s/tmp", d->cfg.cache_dir);
	char *env[] = {tmpdir, (char *)"LC_ALL=C", NULL};
	uv_process_options_t opt = {
	    .file = fb->tc->fatbin_path,
	    .args = args,
	    .env = env,
	    .cwd = jc__pool_cwd(d->pool),
	    .exit_cb = tool_exit_cb,
	    .stdio = stdio,
	    .stdio_count = (int)ns,
	};
	fb->proc.data = fb->timer.data = fb;
	uv_timer_init(d->loop, &fb->timer);
	fb->refs += 2; /* proc and timer, dropped in their close callbacks */
	fb->t_tool_start = jc__now_ns();
	int rc = uv_spawn(d->loop, &fb->proc, &opt);
	if (rc != 0) {
		uv_close((uv_handle_t *)&fb->proc, tool_handle_closed);
		uv_close((uv_handle_t *)&fb->timer, tool_handle_closed);
		fail(fb, JC_EINTERNAL, "cannot start %s: %s", fb->tc->fatbin_path, uv_strerror(rc));
		return;
	}
	if (d->cfg.compile_timeout_s > 0)
		uv_timer_start(&fb->timer, tool_timeout_cb,
			       (uint64_t)d->cfg.compile_timeout_s * 1000, 0);
}

/* The nvFatbin job for a worker: the parts as link inputs, in order. */
static void run_nvfatbin(struct jc_fatbin *fb)
{
	struct jc_flight *f = fb->f;
	struct jc_req *j = &fb->job;
	char lib[4200];
	snprintf(lib, sizeof(lib), "-nvfatbin-library=%s", fb->tc->fatbin_path);
	j->job = JC_JOB_FATBIN;
	j->output = JC_OUTPUT_FATBIN;
	int rc = (j->arch = strdup(f->req.arch)) ? jc__strv_push(&j->link_options, lib) : JC_ENOMEM;
	for (size_t i = 0; rc == 0 && i < fb->n; i++) {
		struct part *p = &fb->parts[i];
		rc = jc__blob_push(
		    &j->link_inputs, &j->n_link_inputs, p->target, p->res.data, p->res.size,
		    jc__target_output(p->target) == JC_OUTPUT_PTX ? JC_INPUT_PTX : JC_INPUT_CUBIN);
	}
	if (rc != 0) {
		fail(fb, JC_ENOMEM, "out of memory for the nvFatbin job");
		return;
	}
	f->wreq = j;
	fb->t_tool_start = jc__now_ns();
	jc__cache_enqueue(fb->d, f);
}

/* Thread pool: reads the hits' objects, checks every part's bytes against
 * its content hash, and for fatbinary puts them into memory files. */
static void check_work_cb(uv_work_t *w)
{
	struct jc_fatbin *fb = w->data;
	int tool = fb->tc->fatbin_tool == JC_FATBIN_FATBINARY;
	uint64_t t = jc__now_ns();
	fb->rc = 0;
	for (size_t i = 0; i < fb->n && fb->rc == 0; i++) {
		struct part *p = &fb->parts[i];
		struct jc_res *r = &p->res;
		if (!r->data && r->fd >= 0) {
			ssize_t got = -1;
			if ((r->data = malloc(r->size ? r->size : 1)))
				got = pread(r->fd, r->data, r->size, 0);
			if (got != (ssize_t)r->size) {
				fb->rc = r->data ? JC_EIO : JC_ENOMEM;
				snprintf(fb->err, sizeof(fb->err),
					 "part %s: reading its object: %s", p->target,
					 got < 0 ? strerror(errno) : "short read");
				break;
			}
		}
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(r->data, r->size));
		if (!r->data || memcmp(c.digest, r->object, 16) != 0) {
			char hex[33];
			jc__hex16(r->object, hex);
			fb->rc = JC_ECORRUPT;
			snprintf(fb->err, sizeof(fb->err),
				 "part %s: object %s fails its hash check "
				 "(`jitcachectl verify` quarantines it)",
				 p->target, hex);
			break;
		}
		if (tool) {
			p->memfd = memfd_create("jitcache-fatbin-part", MFD_CLOEXEC);
			size_t off = 0;
			while (p->memfd >= 0 && off < r->size) {
				ssize_t n = write(p->memfd, r->data + off, r->size - off);
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					break;
				off += (size_t)n;
			}
			if (p->memfd < 0 || off < r->size) {
				fb->rc = JC_EIO;
				snprintf(fb->err, sizeof(fb->err), "memory file for part %s: %s",
					 p->target, strerror(errno));
			}
		}
	}
	if (fb->rc == 0 && tool) {
		fb->out_fd = memfd_create("jitcache-fatbin", MFD_CLOEXEC);
		fb->log_fd = memfd_create("jitcache-fatbinary-log", MFD_CLOEXEC);
		if (fb->out_fd < 0 || fb->log_fd < 0) {
			fb->rc = JC_EIO;
			snprintf(fb->err, sizeof(fb->err), "memory file for fatbinary: %s",
				 strerror(errno));
		}
	}
	fb->t_check = jc__now_ns() - t;
}

static void check_after_cb(uv_work_t *w, int status)
{
	struct jc_fatbin *fb = w->data;
	(void)status;
	if (fb->f && fb->rc != 0)
		fail(fb, fb->rc, "%s", fb->err);
	else if (fb->f && fb->tc->fatbin_tool == JC_FATBIN_FATBINARY)
		run_fatbinary(fb);
	else if (fb->f)
		run_nvfatbin(fb);
	fb_unref(fb);
}

/* Every part has answered. */
static void parts_done(struct jc_fatbin *fb)
{
	fb->t_parts = jc__now_ns() - fb->t0;
	for (size_t i = 0; i < fb->n; i++) {
		const struct jc_res *r = &fb->parts[i].res;
		if (r->status == 0)
			continue;
		/* A compile error is the fatbin's too (and as deterministic). */
		fail(fb, r->status, "target %s: %s", fb->parts[i].target,
		     r->message ? r->message : jc_strerror(r->status));
		return;
	}
	fb->work.data = fb;
	fb->refs++;
	if (uv_queue_work(fb->d->loop, &fb->work, check_work_cb, check_after_cb) != 0) {
		fb->refs--;
		fail(fb, JC_EINTERNAL, "cannot queue the fatbin's part check");
	}
}

/* --- parts ------------------------------------------------------------------- */

/* Deep copies through the codec, the one definition of what a request and
 * a result hold (a result's descriptor is not copied). */
static int copy_through_codec(const void *in, void *out, int is_req)
{
	struct jc_buf b = {0};
	uint16_t type;
	uint32_t len;
	int rc = is_req ? jc__encode_req(&b, in) : jc__encode_res(&b, in);
	if (rc == 0)
		rc = jc__frame_header_decode(b.data, &type, &len);
	if (rc == 0)
		rc = is_req ? jc__decode_req(b.data + JC_FRAME_HDR, len, out)
			    : jc__decode_res(b.data + JC_FRAME_HDR, len, out);
	jc__buf_free(&b);
	return rc;
}

/* A part's answer (jc_conn_sink_fn): kept for the fatbin. */
static void part_sink(void *ctx, const struct jc_res *res, int objfd, int code, const char *message)
{
	struct part *p = ctx;
	struct jc_fatbin *fb = p->fb;
	int rc = res ? copy_through_codec(res, &p->res, 0) : code;
	p->res.fd = objfd;
	if (rc == 0 && p->res.status == 0 && !p->res.data && objfd < 0)
		rc = JC_EINTERNAL; /* an artifact that came neither inline nor by descriptor */
	if (rc != 0) {
		p->res.status = rc;
		free(p->res.message);
		p->res.message = strdup(message ? message : jc_strerror(rc));
	}
	if (--fb->pending == 0 && !fb->starting)
		parts_done(fb);
}

/* A deep copy of the fatbin request for one target (through the codec, the
 * one definition of what a request holds). */
static int part_request(const struct jc_req *req, const char *target, struct jc_req *out)
{
	int rc = copy_through_codec(req, out, 1);
	if (rc != 0)
		return rc;
	free(out->arch);
	free(out->reject_message);
	out->reject_message = NULL;
	out->reject_reason = JC_REJECT_NONE;
	out->output = jc__target_output(target);
	return (out->arch = strdup(target)) ? 0 : JC_ENOMEM;
}

static void fatbin_finish(struct jc_flight *f);

static const struct jc_fatbin_ops fatbin_ops = {
    .finish = fatbin_finish,
    .free = fatbin_free,
};

int jc__fatbin_start(struct jc_daemon *d, struct jc_flight *f, struct jc_conn *conn)
{
	struct jc_targets t;
	struct jc_req sub[JC_TARGETS_MAX];
	char err[256];
	if (jc__targets_parse(f->req.arch, &t, err, sizeof(err)) != 0)
		return JC_EINVAL; /* validated before: cannot happen */
	struct jc_fatbin *fb = calloc(1, sizeof(*fb));
	if (!fb)
		return JC_ENOMEM;
	fb->d = d;
	fb->f = f;
	fb->tc = f->tc;
	fb->refs = 1;
	fb->out_fd = fb->log_fd = -1;
	fb->t0 = jc__now_ns();
	memset(sub, 0, sizeof(sub));
	int rc = 0;
	for (size_t i = 0; i < t.n; i++, fb->n++) {
		struct part *p = &fb->parts[i];
		p->fb = fb;
		jc__res_init(&p->res);
		p->memfd = -1;
		memcpy(p->target, t.v[i], sizeof(p->target));
		if (rc == 0)
			rc = part_request(&f->req, t.v[i], &sub[i]);
		if (rc == 0 && !(p->conn = d->request.conn_ops->internal(d, conn, 0, part_sink, p)))
			rc = JC_ENOMEM;
	}
	if (rc != 0) {
		for (size_t i = 0; i < t.n; i++)
			jc__req_clear(&sub[i]);
		fatbin_free(fb);
		return JC_ENOMEM;
	}
	f->fatbin = fb;
	f->fatbin_ops = &fatbin_ops;
	/* Parts answered at once (hits, refusals) must not end the flight
	 * while the others are still being asked for. */
	fb->starting = 1;
	fb->pending = fb->n;
	for (size_t i = 0; i < fb->n; i++)
		d->request.hooks.request(d, fb->parts[i].conn, &sub[i]);
	fb->starting = 0;
	if (fb->pending == 0)
		parts_done(fb);
	return 0;
}

int jc__fatbin_part_conn(const struct jc_fatbin *fb, const struct jc_conn *conn)
{
	for (size_t i = 0; i < fb->n; i++)
		if (fb->parts[i].conn == conn)
			return 1;
	return 0;
}

/* --- the result ------------------------------------------------------------- */

static const char *tool_name(int tool)
{
	return tool == JC_FATBIN_NVFATBIN ? "nvFatbin" : "fatbinary";
}

/* At the end of a fatbin flight, before it is published (jc_fatbin_ops.
 * finish): its log (where each part came from, the steps' times), lowered
 * names and build time. */
static void fatbin_finish(struct jc_flight *f)
{
	struct jc_fatbin *fb = f->fatbin;
	struct jc_res *res = &f->res;
	char *log = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&log, &len);
	if (!m)
		return;
	uint64_t sum = 0;
	int compiled = 0, fetched = 0;
	fprintf(m, "jitcache: fatbin of %s: ", f->req.arch);
	for (size_t i = 0; i < fb->n; i++) {
		const struct jc_res *p = &fb->parts[i].res;
		compiled |= p->cache != JC_CACHE_HIT && p->cache != JC_CACHE_REMOTE_HIT;
		fetched |= p->cache == JC_CACHE_REMOTE_HIT;
		sum += p->compile_ns;
		res->cpu_ns += p->cpu_ns; /* the parts' compiles are the fatbin's CPU time */
		fprintf(m, "%s%s %s", i ? ", " : "", fb->parts[i].target,
			p->status && !p->cache ? jc_strerror(p->status)
						: jc__cache_status_name(p->cache) ?: "?");
		if (p->compile_ns)
			fprintf(m, " (compiled in %.1f ms)", p->compile_ns / 1e6);
	}
	if (res->status == 0) {
		if (!fb->t_tool)
			fb->t_tool = jc__now_ns() - fb->t_tool_start; /* nvFatbin: queue + worker */
		fprintf(m,
			"; parts in %.1f ms (their compile times add up to %.1f ms), checked in "
			"%.1f ms, put together by %s in %.1f ms, %.1f ms in all\n",
			fb->t_parts / 1e6, sum / 1e6, fb->t_check / 1e6,
			tool_name(fb->tc->fatbin_tool), fb->t_tool / 1e6,
			(jc__now_ns() - fb->t0) / 1e6);
	} else {
		fprintf(m, "; %s\n", res->message ? res->message : jc_strerror(res->status));
	}
	if (res->log && res->log[0])
		fprintf(m, "--- %s ---\n%s\n", tool_name(fb->tc->fatbin_tool), res->log);
	for (size_t i = 0; i < fb->n; i++)
		if (fb->parts[i].res.log && fb->parts[i].res.log[0])
			fprintf(m, "--- %s ---\n%s\n", fb->parts[i].target, fb->parts[i].res.log);
	if (fclose(m) == 0) {
		free(res->log);
		res->log = log;
	} else {
		free(log);
	}
	if (res->status != 0)
		return;
	/* No part compiled here and some came from the remote tier: a remote
	 * hit for whoever asked (issue 22, item 5), as a part's own would be. */
	if (!compiled && fetched)
		for (struct jc_waiter *w = f->waiters; w; w = w->next)
			if (w->cache == JC_CACHE_MISS)
				w->cache = JC_CACHE_REMOTE_HIT;
	res->compile_ns = jc__now_ns() - fb->t0;
	/* Lowered names do not depend on the target: the first part's, moved. */
	struct jc_res *first = &fb->parts[0].res;
	if (!res->n_lowered) {
		res->lowered = first->lowered;
		res->n_lowered = first->n_lowered;
		first->lowered = NULL;
		first->n_lowered = 0;
	}
}
