/* SPDX-License-Identifier: MIT */
/*
 * libjitcache-client: blocking, one request at a time per handle. This file
 * holds the handle (open, close) and its round trips: a compile through the
 * daemon with reconnects and resends, else in this process; admin commands
 * and stats. Finding the daemon is connect.c's, the settings settings.c's,
 * the request builder and the result's accessors request.c's (handle.h).
 * A hit arrives as a read-only descriptor of the cached object
 * (SCM_RIGHTS); the bytes are read here and checked against their XXH3-128
 * content hash (or come from a memfd the daemon checked and sealed:
 * sealed()), so a corrupted object is never handed to the application.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "client/handle.h"
#include "common/elf_id.h"
#include "common/util.h"
#include "proto/io.h"

#define RETRY_FIRST_WAIT_MS 20

static __thread char connect_errmsg[1024];

JC_API const char *jc_client_errmsg(const jc_client *c)
{
	return c ? c->errmsg : connect_errmsg;
}

int jc__client_new(const jc_options *o, jc_client **out)
{
	*out = NULL;
	jc_client *c = calloc(1, sizeof(*c));
	if (!c)
		return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_ENOMEM, "out of memory");
	jc__conn_init(c);
	c->timeout_ms = -1;
	int rc = jc__client_resolve(c, o, connect_errmsg, sizeof(connect_errmsg));
	if (rc != 0) {
		jc_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

JC_API int jc_client_open(const jc_options *o, jc_client **out)
{
	jc_client *c;
	int rc = jc__client_new(o, &c);
	*out = NULL;
	if (rc != 0)
		return rc;
	if ((rc = jc__conn_find(c)) != 0 && rc != JC_ENOMEM && c->fallback == JC_FALLBACK_COMPILE) {
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
		rc = 0; /* jc_compile compiles in-process */
	}
	if (rc != 0) {
		if (c->errmsg[0])
			snprintf(connect_errmsg, sizeof(connect_errmsg), "%s", c->errmsg);
		jc_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

JC_API int jc_client_connect(const char *socket_path, jc_client **out)
{
	if (!socket_path)
		return jc_client_open(NULL, out);
	jc_options o = {.socket = (char *)socket_path,
			.autostart = 0,
			.fallback = JC_FALLBACK_ERROR,
			.retries = -1};
	return jc_client_open(&o, out);
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
	jc__conn_drop(c);
	jc__buf_free(&c->in);
	jc__buf_free(&c->out);
	free(c->socket);
	free(c->cache_dir);
	free(c->system_socket);
	free(c->daemon);
	free(c->nvrtc);
	free(c->nvrtc_id);
	jc__tree_cache_free(c->trees);
	free(c);
}

/* --- requests to the daemon ---------------------------------------------------------- */

/*
 * Sends the frame in c->out and reads the answer; ERROR frames become codes.
 * A failure of the transport (the write, or the connection closed before an
 * answer) sets c->broken and drops the connection: the request may be sent
 * again on a new one. A timeout or a garbled answer drops it too.
 */
static int roundtrip(jc_client *c, uint16_t want, uint16_t *type, int *fd)
{
	uint64_t t0 = jc__now_ns();
	c->broken = 0;
	int rc = jc__io_write_all(c->fd, c->out.data, c->out.len);
	if (rc != 0) {
		c->broken = 1;
		jc__fail(c->errmsg, sizeof(c->errmsg), JC_EIO, "send to jitcached at %s failed: %s",
			 c->sock, strerror(errno));
		jc__conn_drop(c);
		return JC_EIO;
	}
	jc__conn_spin(c, t0);
	rc = jc__io_read_answer(c->fd, &c->in, type, fd, c->timeout_ms);
	c->fast = jc__now_ns() - t0 < c->spin_ns;
	if (rc != 0) {
		c->broken = rc == JC_EIO;
		if (rc == JC_ETIMEOUT)
			jc__fail(c->errmsg, sizeof(c->errmsg), rc,
				 "no answer from jitcached within %d ms", c->timeout_ms);
		else
			jc__fail(c->errmsg, sizeof(c->errmsg), rc,
				 "no answer from jitcached at %s: %s", c->sock,
				 rc == JC_EIO ? strerror(errno) : jc_strerror(rc));
		jc__conn_drop(c);
		return rc;
	}
	if (*type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		if (jc__decode_error(c->in.data, c->in.len, &code, &msg) != 0)
			code = JC_EPROTO;
		jc__fail(c->errmsg, sizeof(c->errmsg), code, "%s", msg ? msg : jc_strerror(code));
		free(msg);
		/* The daemon closes the connection after an ERROR. */
		jc__conn_drop(c);
		c->broken = code == JC_EBUSY; /* shutting down, or too many clients: try again */
		return code < 0 ? code : JC_EPROTO;
	}
	if (*type != want) {
		jc__conn_drop(c);
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EPROTO,
				"unexpected answer type %u", *type);
	}
	return 0;
}
/* What makes a served descriptor's bytes immutable (memfd seals). */
#define SEALED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
/* Below this size the hash costs less than asking for the seals. */
#define SEALED_MIN (16u << 10)

/*
 * Whether a served descriptor is of a memfd the daemon sealed against every
 * change (daemon/memcache.c: its copy of a hot object, whose bytes it
 * checked against their hash after sealing) holding res->size bytes: then
 * no byte of it can have changed since that check, and the bytes read from
 * it need no other. (Mapping it instead of reading it costs more here: a
 * page fault per page, and the unmap.)
 */
static int sealed(const struct jc_res *res)
{
	struct stat st;
	int seals = res->size < SEALED_MIN ? -1 : fcntl(res->fd, F_GET_SEALS);
	return seals >= 0 && (seals & SEALED) == SEALED && fstat(res->fd, &st) == 0 &&
	       (uint64_t)st.st_size == res->size;
}

/*
 * Reads the served object's res->size bytes from its descriptor into
 * res->data (the bytes the hash check then covers: the daemon checked the
 * file's size when it opened it). A shorter file fails; a descriptor that
 * cannot be read at an offset (not a regular file) fails pread.
 */
static int read_object(struct jc_res *res)
{
	size_t want = res->size, off = 0;
	res->data = malloc(want ? want : 1);
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
	uint64_t t0 = jc__now_ns();
	*out = NULL;
	jc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	jc__res_init(&r->res);
	jc__buf_reset(&c->out);
	uint16_t type;
	int fd = -1;
	/* The application named its NVRTC (the shim's real library): the
	 * daemon serves it only with that very build (req.h, nvrtc_id). */
	char id[80];
	if (c->nvrtc && !c->nvrtc_id && jc__file_identity(c->nvrtc, id, sizeof(id), NULL, 0) == 0 &&
	    strcmp(id, "none") != 0)
		c->nvrtc_id = strdup(id);
	struct jc_req sent = *req; /* shallow: req keeps ownership */
	sent.nvrtc_id = c->nvrtc_id;
	/* A daemon older than version 4 would refuse the field: then a request
	 * under the program's own name, as any. */
	if (c->proto < 4)
		sent.name_free = 0;
	int rc = jc__encode_req(&c->out, &sent);
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
		int checked = r->res.fd >= 0 && !r->res.data && sealed(&r->res);
		if (r->res.fd >= 0 && !r->res.data)
			rc = read_object(&r->res);
		else if (!r->res.data)
			rc = JC_EPROTO;
		rc = rc ?: checked ? 0 : check_hash(&r->res);
		if (rc) {
			memcpy(bad_object, r->res.object, 16);
			jc__fail(c->errmsg, sizeof(c->errmsg), rc,
				 "artifact failed its size/hash check");
		}
	} else if (rc == 0 && r->res.status == JC_ECOMPILE) {
		/* The result is kept (its log says why); the message says what failed. */
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s",
			 r->res.message ? r->res.message : jc_strerror(JC_ECOMPILE));
	} else if (rc == 0) {
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), r->res.status, "%s",
			      r->res.message ? r->res.message : jc_strerror(r->res.status));
	}
	if (rc != 0) {
		jc_result_free(r);
		return rc;
	}
	jc__hex16(r->res.key, r->key);
	r->total_ns = jc__now_ns() - t0;
	*out = r;
	return r->res.status;
}

/*
 * do_compile() for a daemon that must not open our include directories: the
 * files' hashes first (a hit re-stats the tree, reads nothing), their bytes
 * only when the daemon has no entry (JC_ENOTFOUND).
 */
static int compile_tree(jc_client *c, const struct jc_req *req, jc_result **out,
			uint8_t bad_object[16])
{
	struct jc_req view;
	int rc = 0;
	uint64_t walk_ns = 0;
	for (int bytes = 0; bytes < 2; bytes++) {
		uint64_t ns;
		rc = jc__tree_build(&c->trees, c->daemon_toolkit, req, bytes, &view, &ns, c->errmsg,
				    sizeof(c->errmsg));
		if (rc != 0)
			return rc;
		walk_ns += ns;
		rc = do_compile(c, &view, out, bad_object);
		jc__req_tree_clear(&view);
		if (rc != JC_ENOTFOUND || c->broken)
			break;
	}
	if (*out)
		(*out)->includes_ns = walk_ns;
	return rc;
}

/* --- in-process fallback, and the compile loop --------------------------------------- */

/* Step 6: req compiled here; same result shape as the daemon's. */
static int compile_here(jc_client *c, const struct jc_req *req, jc_result **out)
{
	char desc[4400], err[4400];
	uint64_t t0 = jc__now_ns();
	*out = NULL;
	int rc = jc__fallback_load(c->nvrtc, desc, sizeof(desc), err, sizeof(err));
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s; and %s", c->why_none, err);
	if (!c->warned) {
		c->warned = 1;
		jc__client_say(c, JC_LOG_WARNING,
			       "jitcache: %s; compiling in this process with %s: results are "
			       "not cached",
			       c->why_none, desc);
	}
	jc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	jc__res_init(&r->res);
	rc = jc__fallback_run(req, &r->res);
	if (rc != 0 && rc != JC_ECOMPILE) {
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s",
			 r->res.message ? r->res.message : jc_strerror(rc));
		jc_result_free(r);
		return rc;
	}
	if (rc == JC_ECOMPILE)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s",
			 r->res.message ? r->res.message : jc_strerror(rc));
	r->key[0] = '\0';
	r->total_ns = jc__now_ns() - t0;
	*out = r;
	return rc;
}

/*
 * req through a daemon, mending a broken connection and resending up to
 * c->retries times (jitcache.h, "Reconnect"), else in-process when allowed.
 * A corrupt artifact is rejected once (the daemon quarantines it and
 * compiles afresh).
 */
static int run(jc_client *c, const struct jc_req *req, jc_result **out)
{
	struct jc_req rejecting;
	uint8_t bad[16] = {0};
	int rc = 0, corrupt_seen = 0, mending = 0, attempt = 0;
	unsigned wait = RETRY_FIRST_WAIT_MS;
	char first[1024] = "";
	*out = NULL;
	jc__conn_leave_parent(c);
	for (;;) {
		if (c->fd < 0 && (rc = jc__conn_find(c)) != 0) {
			/* None now: the reason stays for the fallback's warning. A
			 * handle without a daemon does not wait for one; one whose
			 * daemon went away in this call does, a little. */
			snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
			if (!mending || rc == JC_ENOMEM || attempt >= c->retries)
				break;
			jc__sleep_ms(wait);
			wait *= 2;
			attempt++;
			continue;
		}
		if (mending)
			jc__client_say(c, JC_LOG_INFO,
				       "jitcache: resending to jitcached at %s (try %d)", c->sock,
				       attempt + 1);
		rc = req->include_dirs.n && (c->daemon_other_uid || c->send_trees)
			 ? compile_tree(c, req, out, bad)
			 : do_compile(c, req, out, bad);
		if (rc == JC_ECORRUPT && !corrupt_seen) {
			corrupt_seen = 1;
			rejecting = *req; /* shallow: req keeps ownership */
			memcpy(rejecting.reject_object, bad, 16);
			rejecting.reject_reason = JC_REJECT_CORRUPT;
			rejecting.reject_message = NULL;
			req = &rejecting;
			continue;
		}
		if (!c->broken && rc != JC_EBUSY)
			return rc;
		jc__conn_drop(c);
		if (!mending)
			snprintf(first, sizeof(first), "%s", c->errmsg);
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
		mending = 1;
		if (attempt >= c->retries)
			break;
		if (rc == JC_EBUSY) { /* a stopping or overloaded daemon: give it time */
			jc__sleep_ms(wait);
			wait *= 2;
		}
		attempt++;
	}
	if (mending && strcmp(first, c->errmsg) != 0) {
		/* What went wrong first says most: "shutting down", "reset". */
		snprintf(c->why_none, sizeof(c->why_none), "%.500s; then, %d tries later: %.400s",
			 first, attempt + 1, c->errmsg);
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->why_none);
	}
	if (c->fallback != JC_FALLBACK_COMPILE || rc == JC_ENOMEM)
		return rc;
	return compile_here(c, req, out);
}

/* Appends "-I<absolute dir>" to opts and the absolute dir to dirs (a
 * relative dir is taken against the working directory, as NVRTC does). */
static int push_dir(struct jc_strv *opts, struct jc_strv *dirs, const char *dir, char *err,
		    size_t errlen)
{
	char cwd[PATH_MAX], *abs = NULL, *opt = NULL;
	if (dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return jc__fail(err, errlen, JC_EINVAL,
					"cannot resolve include directory %s: %s", dir,
					strerror(errno));
		while (dir[0] == '.' && dir[1] == '/')
			dir += 2;
		if (asprintf(&abs, "%s%s%s", cwd, strcmp(dir, ".") && *dir ? "/" : "",
			     strcmp(dir, ".") ? dir : "") < 0)
			abs = NULL;
	} else {
		abs = strdup(dir);
	}
	if (abs) {
		size_t n = strlen(abs);
		while (n > 1 && abs[n - 1] == '/')
			abs[--n] = '\0';
	}
	int rc = abs && asprintf(&opt, "-I%s", abs) >= 0 ? 0 : JC_ENOMEM;
	rc = rc ?: jc__strv_push(opts, opt);
	rc = rc ?: jc__strv_push(dirs, abs);
	free(abs);
	free(opt);
	return rc == JC_ENOMEM ? jc__fail(err, errlen, rc, "out of memory") : rc;
}

static void include_view_clear(struct jc_req *view, const struct jc_req *in)
{
	if (view->options.v == in->options.v)
		return;
	struct jc_req owned = {.options = view->options, .include_dirs = view->include_dirs};
	jc__req_clear(&owned);
}

/*
 * The request as it goes out: every include directory option as one
 * "-I<absolute DIR>" with DIR in include_dirs too (the daemon checks both
 * agree), and jc_request_add_include_dir's directories not named by an
 * option appended. *out is a shallow copy of in unless in has include
 * directories; then out->options and out->include_dirs are new arrays
 * (free with include_view_clear). 0, JC_EINVAL (an option without its
 * directory, an unresolvable relative one) or JC_ENOMEM.
 */
static int include_view(const struct jc_req *in, struct jc_req *out, char *err, size_t errlen)
{
	const struct jc_strv *o = &in->options;
	const char *val;
	size_t used;
	int dir, any = in->include_dirs.n > 0;
	*out = *in;
	for (size_t i = 0; i < o->n && !any; i++)
		any = jc__inc_option(o, i, &dir, &val, &used) && dir;
	if (!any)
		return 0;
	struct jc_strv opts = {0}, dirs = {0};
	int rc = 0;
	for (size_t i = 0; i < o->n && rc == 0; i++) {
		if (!jc__inc_option(o, i, &dir, &val, &used) || !dir) {
			rc = jc__strv_push(&opts, o->v[i]);
			continue;
		}
		if (!val || !*val)
			rc = jc__fail(err, errlen, JC_EINVAL, "option \"%s\" needs a directory",
				      o->v[i]);
		else
			rc = push_dir(&opts, &dirs, val, err, errlen);
		i += used - 1;
	}
	size_t from_options = dirs.n;
	for (size_t i = 0; i < in->include_dirs.n && rc == 0; i++) {
		struct jc_strv probe_o = {0}, probe_d = {0};
		rc = push_dir(&probe_o, &probe_d, in->include_dirs.v[i], err, errlen);
		int named = 0;
		for (size_t k = 0; rc == 0 && k < from_options && !named; k++)
			named = strcmp(dirs.v[k], probe_d.v[0]) == 0;
		if (rc == 0 && !named)
			rc = jc__strv_push(&opts, probe_o.v[0])
				 ?: jc__strv_push(&dirs, probe_d.v[0]);
		struct jc_req probe = {.options = probe_o, .include_dirs = probe_d};
		jc__req_clear(&probe);
	}
	if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory");
	out->options = opts;
	out->include_dirs = dirs;
	if (rc != 0) {
		include_view_clear(out, in);
		*out = *in;
	}
	return rc;
}

/* run() on the request as it goes out. */
static int run_request(jc_client *c, const struct jc_req *req, jc_result **out)
{
	struct jc_req view;
	*out = NULL;
	int rc = include_view(req, &view, c->errmsg, sizeof(c->errmsg));
	if (rc != 0)
		return rc;
	rc = run(c, &view, out);
	include_view_clear(&view, req);
	return rc;
}

JC_API int jc_compile(jc_client *c, const jc_request *r, jc_result **out)
{
	return run_request(c, &r->req, out);
}

JC_API int jc_report_load_failure(jc_client *c, const jc_request *r, const jc_result *res,
				  const char *reason, jc_result **out)
{
	struct jc_req copy = r->req; /* shallow: r keeps ownership */
	memcpy(copy.reject_object, res->res.object, 16);
	copy.reject_reason = JC_REJECT_LOAD_FAILED;
	copy.reject_message = (char *)reason;
	return run_request(c, &copy, out);
}

int jc__client_admin(jc_client *c, const struct jc_admin_req *req, struct jc_admin_reply *out)
{
	uint16_t type;
	int fd = -1;
	/* Not resent after a broken connection (purge is not idempotent): the
	 * caller decides; a later call reconnects. */
	jc__conn_leave_parent(c);
	if (c->fd < 0 && jc__conn_find(c) != 0)
		return JC_ECONNECT;
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
