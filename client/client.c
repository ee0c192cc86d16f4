/* SPDX-License-Identifier: MIT */
/*
 * libjitcache-client: blocking, one request at a time per handle. A hit
 * arrives as a read-only descriptor of the cached object (SCM_RIGHTS); the
 * bytes are read here and checked against their XXH3-128 content hash, so
 * a corrupted object is never handed to the application.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "client_internal.h"
#include "io.h"
#include "util.h"

/* A daemon that accepts but does not answer the handshake (stopped, wedged). */
#define CONNECT_TIMEOUT_MS 10000

struct jc_client {
	int fd;
	struct jc_buf in, out;
	uint64_t spin_ns;      /* poll for the answer this long; 0 never */
	int timeout_ms;        /* wait for an answer at most this long; -1 forever */
	int fast;              /* the last answer came within spin_ns */
	char errmsg[512];
};

struct jc_result {
	struct jc_res res;
	char key[33];
	uint64_t total_ns;
};

static __thread char connect_errmsg[512];

#define SPIN_NS_DEFAULT 50000 /* see jc_client_connect */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* $JITCACHE_CLIENT_SPIN_US in nanoseconds: 0 to 1 s, else the default. */
static uint64_t spin_setting(void)
{
	const char *s = getenv("JITCACHE_CLIENT_SPIN_US");
	char *end;
	if (!s || !*s)
		return SPIN_NS_DEFAULT;
	errno = 0;
	unsigned long long us = strtoull(s, &end, 10);
	return errno || *end || us > 1000000 ? SPIN_NS_DEFAULT : us * 1000;
}

/*
 * Polls the socket for the answer until t0 + c->spin_ns, before the blocking
 * read (see jc_client_connect for why), but only while the last answer came
 * within that time: a compile, or a daemon slowed by many clients (which
 * then needs the CPU this loop would burn), turns polling off until an
 * answer is fast again. Each turn yields the CPU to any other runnable task
 * (the daemon, on this CPU, polls for requests the same way: server.c).
 * Only peeks: nothing is consumed and no descriptor is received (no control
 * buffer is given).
 */
static void spin_for_answer(jc_client *c, uint64_t t0)
{
	char b;
	if (!c->fast)
		return;
	do {
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return; /* data, EOF or an error: the read reports it */
		sched_yield(); /* the daemon may be waiting for this CPU */
	} while (now_ns() - t0 < c->spin_ns);
}


JC_API const char *jc_client_errmsg(const jc_client *c)
{
	return c ? c->errmsg : connect_errmsg;
}

int jc__client_fd(const jc_client *c)
{
	return c->fd;
}

JC_API int jc_client_connect(const char *socket_path, jc_client **out)
{
	char path[4096];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	*out = NULL;
	if (!socket_path) {
		if (jc__default_socket_path(NULL, path, sizeof(path)) != 0)
			return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_EINVAL, "no socket path: set JITCACHE_SOCKET or HOME");
		socket_path = path;
	}
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_EINVAL, "socket path too long: %s", socket_path);
	strcpy(sa.sun_path, socket_path);
	jc_client *c = calloc(1, sizeof(*c));
	if (!c)
		return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_ENOMEM, "out of memory");
	c->spin_ns = spin_setting();
	c->timeout_ms = -1;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_ECONNECT, "cannot connect to jitcached at %s: %s", socket_path,
		       strerror(errno));
		jc_client_close(c);
		return JC_ECONNECT;
	}
	uint16_t type;
	uint32_t version = 0;
	char *name = NULL;
	int rc = jc__encode_hello(&c->out, JC_MSG_HELLO, JC_PROTO_VERSION, "libjitcache-client " JC_VERSION_STRING);
	int wrc = rc ?: jc__io_write_all(c->fd, c->out.data, c->out.len);
	/* A daemon that refuses a connection says why and closes it, maybe
	 * before our HELLO arrives: read its answer even if the write failed. */
	rc = rc ?: jc__io_read_frame(c->fd, &c->in, &type, NULL, CONNECT_TIMEOUT_MS);
	if (rc == 0 && type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		jc__decode_error(c->in.data, c->in.len, &code, &msg);
		jc__fail(connect_errmsg, sizeof(connect_errmsg), code, "daemon refused the handshake: %s", msg ? msg : "");
		free(msg);
		jc_client_close(c);
		return code;
	}
	if (rc == 0 && wrc != 0)
		rc = wrc;
	if (rc == 0 && type != JC_MSG_HELLO_OK)
		rc = JC_EPROTO;
	rc = rc ?: jc__decode_hello(c->in.data, c->in.len, &version, &name);
	free(name);
	if (rc == 0 && version != JC_PROTO_VERSION)
		rc = JC_EVERSION;
	if (rc != 0) {
		jc__fail(connect_errmsg, sizeof(connect_errmsg), rc, "handshake with jitcached at %s failed: %s", socket_path,
		       rc == JC_ETIMEOUT ? "no answer in 10 s (daemon stopped or wedged?)"
					 : jc_strerror(rc));
		jc_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

JC_API int jc_client_set_timeout(jc_client *c, int timeout_ms)
{
	if (timeout_ms < -1)
		return JC_EINVAL;
	c->timeout_ms = timeout_ms;
	return 0;
}

JC_API void jc_client_close(jc_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	jc__buf_free(&c->in);
	jc__buf_free(&c->out);
	free(c);
}

/* Sends the frame in c->out and reads the answer; ERROR frames become codes. */
static int roundtrip(jc_client *c, uint16_t want, uint16_t *type, int *fd)
{
	uint64_t t0 = now_ns();
	int rc = jc__io_write_all(c->fd, c->out.data, c->out.len);
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EIO, "send to jitcached failed: %s", strerror(errno));
	spin_for_answer(c, t0);
	rc = jc__io_read_frame(c->fd, &c->in, type, fd, c->timeout_ms);
	c->fast = now_ns() - t0 < c->spin_ns;
	if (rc == JC_ETIMEOUT)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "no answer from jitcached within %d ms", c->timeout_ms);
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "no answer from jitcached: %s",
			      rc == JC_EIO ? strerror(errno) : jc_strerror(rc));
	if (*type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		if (jc__decode_error(c->in.data, c->in.len, &code, &msg) != 0)
			code = JC_EPROTO;
		jc__fail(c->errmsg, sizeof(c->errmsg), code, "%s", msg ? msg : jc_strerror(code));
		free(msg);
		return code < 0 ? code : JC_EPROTO;
	}
	if (*type != want)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EPROTO, "unexpected answer type %u", *type);
	return 0;
}

/*
 * Reads the served object from its descriptor into res->data. It must hold
 * exactly res->size bytes: one more is asked for, so that a longer file shows
 * as well as a shorter one, without an fstat. A descriptor that cannot be
 * read at an offset (not a regular file) fails pread.
 */
static int read_object(struct jc_res *res)
{
	size_t want = res->size + 1, off = 0;
	res->data = malloc(want);
	if (!res->data)
		return JC_ENOMEM;
	while (off < want) {
		ssize_t n = pread(res->fd, res->data + off, want - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return JC_ECORRUPT;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off != res->size)
		return JC_ECORRUPT;
	close(res->fd);
	res->fd = -1;
	return 0;
}

static int check_hash(const struct jc_res *res)
{
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(res->data, res->size));
	return memcmp(canon.digest, res->object, 16) == 0 ? 0 : JC_ECORRUPT;
}

/* One COMPILE round trip. When the served bytes fail their check, the
 * object's hash is copied to bad_object so the caller can reject it. */
static int do_compile(jc_client *c, const struct jc_req *req, jc_result **out,
		      uint8_t bad_object[16])
{
	uint64_t t0 = now_ns();
	*out = NULL;
	jc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	jc__res_init(&r->res);
	jc__buf_reset(&c->out);
	uint16_t type;
	int fd = -1;
	int rc = jc__encode_req(&c->out, req);
	if (rc != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "request too large or out of memory");
	else
		rc = roundtrip(c, JC_MSG_RESULT, &type, &fd);
	if (rc == 0 && (rc = jc__decode_res(c->in.data, c->in.len, &r->res)) != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "malformed RESULT from jitcached");
	if (rc != 0 && fd >= 0)
		close(fd);
	else
		r->res.fd = fd;
	if (rc == 0 && r->res.status == 0) {
		if (r->res.fd >= 0 && !r->res.data)
			rc = read_object(&r->res);
		else if (!r->res.data)
			rc = JC_EPROTO;
		rc = rc ?: check_hash(&r->res);
		if (rc) {
			memcpy(bad_object, r->res.object, 16);
			jc__fail(c->errmsg, sizeof(c->errmsg), rc, "artifact failed its size/hash check");
		}
	} else if (rc == 0 && r->res.status == JC_ECOMPILE) {
		/* The result is kept (its log says why); the message says what failed. */
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s", r->res.message ? r->res.message : jc_strerror(JC_ECOMPILE));
	} else if (rc == 0) {
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), r->res.status, "%s",
			    r->res.message ? r->res.message : jc_strerror(r->res.status));
	}
	if (rc != 0) {
		jc_result_free(r);
		return rc;
	}
	jc__hex16(r->res.key, r->key);
	r->total_ns = now_ns() - t0;
	*out = r;
	return r->res.status;
}

/* Sends req with a rejection of object attached (a shallow copy: req keeps
 * ownership of everything). */
static int compile_rejecting(jc_client *c, const struct jc_req *req, const uint8_t object[16],
			     uint32_t reason, const char *message, jc_result **out)
{
	struct jc_req copy = *req;
	uint8_t bad[16];
	memcpy(copy.reject_object, object, 16);
	copy.reject_reason = reason;
	copy.reject_message = (char *)message;
	return do_compile(c, &copy, out, bad);
}

JC_API int jc_compile(jc_client *c, const jc_request *r, jc_result **out)
{
	uint8_t bad[16];
	int rc = do_compile(c, &r->req, out, bad);
	if (rc == JC_ECORRUPT) /* once: the daemon quarantines it and recompiles */
		rc = compile_rejecting(c, &r->req, bad, JC_REJECT_CORRUPT, NULL, out);
	return rc;
}

JC_API int jc_report_load_failure(jc_client *c, const jc_request *r, const jc_result *res,
				  const char *reason, jc_result **out)
{
	return compile_rejecting(c, &r->req, res->res.object, JC_REJECT_LOAD_FAILED, reason, out);
}

int jc__client_admin(jc_client *c, const struct jc_admin_req *req, struct jc_admin_reply *out)
{
	uint16_t type;
	int fd = -1;
	jc__buf_reset(&c->out);
	int rc = jc__encode_admin(&c->out, req);
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "admin request too large");
	rc = roundtrip(c, JC_MSG_ADMIN_REPLY, &type, &fd);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (rc = jc__decode_admin_reply(c->in.data, c->in.len, out)) != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "malformed ADMIN_REPLY from jitcached");
	return rc;
}

struct jc_stats {
	struct jc_admin_reply reply; /* one record */
};

JC_API int jc_client_stats(jc_client *c, jc_stats **out)
{
	if (!out)
		return JC_EINVAL;
	*out = NULL;
	if (!c)
		return JC_EINVAL;
	jc_stats *s = calloc(1, sizeof(*s));
	if (!s)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	struct jc_admin_req req = {.command = (char *)"stats"};
	int rc = jc__client_admin(c, &req, &s->reply);
	if (rc == 0 && s->reply.status != 0)
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), s->reply.status, "stats: %s",
			      s->reply.message ? s->reply.message : jc_strerror(s->reply.status));
	else if (rc == 0 && s->reply.n_rec != 1)
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), JC_EPROTO,
			      "stats: %zu records from jitcached, expected 1", s->reply.n_rec);
	if (rc != 0) {
		jc_stats_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

JC_API size_t jc_stats_count(const jc_stats *s)
{
	return s ? s->reply.rec[0].n : 0;
}

JC_API int jc_stats_at(const jc_stats *s, size_t i, const char **name, int64_t *num,
		       const char **str)
{
	if (!s || !name || !num || !str || i >= s->reply.rec[0].n)
		return JC_EINVAL;
	const struct jc_kv *kv = &s->reply.rec[0].kv[i];
	*name = kv->name;
	*num = kv->is_int ? kv->i : 0;
	*str = kv->is_int ? NULL : kv->s;
	return 0;
}

JC_API void jc_stats_free(jc_stats *s)
{
	if (!s)
		return;
	jc__admin_reply_clear(&s->reply);
	free(s);
}

/* --- request builder ----------------------------------------------------------- */

JC_API int jc_request_new(jc_request **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return JC_ENOMEM;
	(*out)->req.job = JC_JOB_COMPILE;
	(*out)->req.output = JC_OUTPUT_CUBIN;
	return 0;
}

JC_API void jc_request_free(jc_request *r)
{
	if (!r)
		return;
	jc__req_clear(&r->req);
	free(r);
}

/* Replaces *dst with a copy of s. */
static int set_str(char **dst, const char *s)
{
	if (!s)
		return JC_EINVAL;
	char *copy = strdup(s);
	if (!copy)
		return JC_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/* The job follows from what the request holds. */
static void update_job(struct jc_req *q)
{
	if (q->n_link_inputs)
		q->job = q->source ? JC_JOB_COMPILE_LINK : JC_JOB_LINK;
	else
		q->job = JC_JOB_COMPILE;
}

JC_API int jc_request_set_source(jc_request *r, const char *name, const void *data, size_t size)
{
	struct jc_req *q = &r->req;
	if (!name || (!data && size))
		return JC_EINVAL;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return JC_ENOMEM;
	if (size)
		memcpy(copy, data, size);
	int rc = set_str(&q->source_name, name);
	if (rc) {
		free(copy);
		return rc;
	}
	free(q->source);
	q->source = copy;
	q->source_size = size;
	update_job(q);
	return 0;
}

JC_API int jc_request_add_header(jc_request *r, const char *name, const void *data, size_t size)
{
	if (!name || (!data && size))
		return JC_EINVAL;
	return jc__blob_push(&r->req.headers, &r->req.n_headers, name, data, size, 0);
}

JC_API int jc_request_add_include_dir(jc_request *r, const char *path)
{
	return path && *path ? jc__strv_push(&r->req.include_dirs, path) : JC_EINVAL;
}

JC_API int jc_request_add_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.options, option) : JC_EINVAL;
}

JC_API int jc_request_set_arch(jc_request *r, const char *arch)
{
	return set_str(&r->req.arch, arch);
}

JC_API int jc_request_set_output(jc_request *r, jc_output output)
{
	if (output < JC_CUBIN || output > JC_LTOIR)
		return JC_EINVAL;
	r->req.output = (uint32_t)output;
	return 0;
}

JC_API int jc_request_add_name_expression(jc_request *r, const char *expr)
{
	return expr && *expr ? jc__strv_push(&r->req.name_exprs, expr) : JC_EINVAL;
}

JC_API int jc_request_add_link_input(jc_request *r, jc_link_input type, const char *name,
				     const void *data, size_t size)
{
	if (type < JC_LINK_CUBIN || type > JC_LINK_LIBRARY || !name || (!data && size))
		return JC_EINVAL;
	int rc = jc__blob_push(&r->req.link_inputs, &r->req.n_link_inputs, name, data, size,
			       (uint32_t)type);
	update_job(&r->req);
	return rc;
}

JC_API int jc_request_add_link_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.link_options, option) : JC_EINVAL;
}

JC_API int jc_request_set_app_abi(jc_request *r, const char *abi)
{
	return set_str(&r->req.app_abi, abi);
}

int jc__request_set_test_fault(jc_request *r, uint32_t fault)
{
	if (fault > JC_FAULT_ALLOC)
		return JC_EINVAL;
	r->req.test_fault = fault;
	return 0;
}

/* --- results --------------------------------------------------------------------- */

JC_API void jc_result_free(jc_result *res)
{
	if (!res)
		return;
	jc__res_clear(&res->res);
	free(res);
}

JC_API const void *jc_result_data(const jc_result *res, size_t *size)
{
	if (size)
		*size = res->res.status == 0 ? res->res.size : 0;
	return res->res.status == 0 ? res->res.data : NULL;
}

JC_API jc_output jc_result_output(const jc_result *res)
{
	return (jc_output)res->res.output;
}

JC_API jc_cache_status jc_result_cache_status(const jc_result *res)
{
	return (jc_cache_status)res->res.cache;
}

JC_API const char *jc_result_log(const jc_result *res)
{
	return res->res.log ? res->res.log : "";
}

JC_API const char *jc_result_lowered_name(const jc_result *res, const char *expr)
{
	for (size_t i = 0; i < res->res.n_lowered; i++)
		if (strcmp(res->res.lowered[i].expr, expr) == 0)
			return res->res.lowered[i].lowered;
	return NULL;
}

JC_API size_t jc_result_lowered_count(const jc_result *res)
{
	return res->res.n_lowered;
}

JC_API int jc_result_lowered_at(const jc_result *res, size_t i, const char **expr,
				const char **lowered)
{
	if (i >= res->res.n_lowered)
		return JC_EINVAL;
	*expr = res->res.lowered[i].expr;
	*lowered = res->res.lowered[i].lowered;
	return 0;
}

JC_API const char *jc_result_key(const jc_result *res)
{
	return res->key;
}

JC_API uint64_t jc_result_time_ns(const jc_result *res, jc_timing which)
{
	switch (which) {
	case JC_TIME_TOTAL:
		return res->total_ns;
	case JC_TIME_SERVER:
		return res->res.server_ns;
	case JC_TIME_COMPILE:
		return res->res.compile_ns;
	}
	return 0;
}
