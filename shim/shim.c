/* SPDX-License-Identifier: MIT */
/*
 * libjitcache-nvrtc: a drop-in libnvrtc.so.<major> whose nvrtcCompileProgram
 * is served by jitcached. Every other function, and every compile the cache
 * cannot key safely, goes to the real libnvrtc (real.h).
 *
 * A program handle is a struct prog. It keeps copies of what the caller gave
 * (source, name, headers, name expressions, options) so the same program can
 * be rebuilt in the real library at any time ("materialised"): the real
 * nvrtcProgram is created only when a call needs it, so a cache hit
 * (create, compile, get CUBIN) never loads the real library at all.
 *
 * States of a program:
 *   NEW     not compiled: every query goes to the (lazily created) real
 *           program, which answers exactly as NVRTC does before a compile;
 *   SERVED  compiled by jitcached (or, with no daemon, by the client
 *           library's in-process fallback: JC_UNCACHED): outputs, log and
 *           lowered names come from its result; an output of the same compile
 *           that was not fetched (PTX beside a cubin) is asked for lazily,
 *           with the same key rule;
 *   REAL    compiled by the real library (pass-through, a failed compile, a
 *           refused request, no daemon with JITCACHE_FALLBACK=error, a second
 *           compile of the program): everything is forwarded.
 * A compile that fails in jitcached is compiled again by the real library,
 * since the caller must see NVRTC's own result code (the daemon keeps a
 * failure's log, not which nvrtcResult it was). Return codes of the SERVED
 * state for absent outputs and bad arguments are NVRTC 13's, checked by the
 * conformance table (tests/shim/conformance.c) against the real library.
 *
 * Thread safety: as NVRTC, any call on any program from any thread; each
 * program has a mutex, connections to jitcached come from a pool.
 *
 * This file holds the program handles and the NVRTC API; what the shim
 * keeps per process (the connection pool, the counters and their report,
 * fork handling, jitcache's own programs) is process.c's, the option
 * planning options.c's, the real library real.c's.
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/util.h"
#include "shim/real.h"
#include "shim/shim.h"

#define NVRTC_API     __attribute__((visibility("default")))
#define PROG_MAGIC    0x6a637072u /* "jcpr" */
#define LOG_TRUNCATED "[jitcache: log truncated]"

enum state { ST_NEW, ST_SERVED, ST_REAL };
enum out { OUT_PTX, OUT_CUBIN, OUT_LTOIR, OUT_OPTIX, OUT_LOG };

struct prog {
	uint32_t magic;
	pthread_mutex_t mu;
	enum state state;
	int flow;	   /* a flow callback was set: compiles go to the real library */
	nvrtcProgram real; /* NULL until needed */
	char *src, *name;
	int n_headers;
	char **headers, **include_names;
	char **exprs;
	size_t n_exprs;
	char **opts; /* options of the first compile */
	int n_opts;
	jc_request *req; /* the request of the SERVED compile */
	jc_result *res;	 /* its result (kept until destroy: lowered names point into it) */
	jc_result *ptx;	 /* PTX fetched beside a cubin, or NULL */
	int canon;	 /* asked as name-free: its log may say JC_NAME_STANDIN */
	char *log;	 /* its log naming the program again (canon), or NULL */
};

/*
 * The program's name as NVRTC uses it ("" and NULL are its
 * "default_program"). NVRTC searches a quoted #include first in the
 * directory of the program's name (the working directory for a name without
 * one), which the daemon neither sees nor keys: a program with such an
 * include that is there passes through (program_dir_include). Otherwise the
 * name reaches the artifact only as text (core/progname.h); where the source,
 * its in-memory headers and options cannot put it there in another way
 * (name_free, jc__shim_plan), jitcached is asked for a name-free entry
 * (req.h name_free): it compiles with the caller's name and shares the
 * result between every name when the name is not in it, so that programs
 * named after a fresh temporary file in every process (CuPy's disk-cache
 * path) share one entry; the log it sends back then says JC_NAME_STANDIN
 * where NVRTC named the program, and is given the caller's name again.
 */

static const char *nvrtc_name(const struct prog *q)
{
	return q->name && q->name[0] ? q->name : "default_program";
}

/* ---- helpers ---------------------------------------------------------------- */

#define REAL(fn, ...)                                                                              \
	do {                                                                                       \
		const struct jc_real_nvrtc *real_ = jc__real();                                    \
		return real_ ? real_->fn(__VA_ARGS__) : NVRTC_ERROR_INTERNAL_ERROR;                \
	} while (0)

/* The shim's program behind a handle, or NULL for NULL, a handle of the real
 * library (made while inside the client library) or a call from there. */
static struct prog *shim_prog(nvrtcProgram p)
{
	struct prog *q = (struct prog *)p;
	return jc__shim_bypass() || !q || q->magic != PROG_MAGIC ? NULL : q;
}

static char *dup_or_null(const char *s, int *ok)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*ok = 0;
	return d;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* Creates the real program (with the name expressions so far) if there is
 * none. Returns NVRTC's code; q->real is set on success. */
static nvrtcResult real_of(struct prog *q)
{
	if (q->real)
		return NVRTC_SUCCESS;
	const struct jc_real_nvrtc *R = jc__real();
	if (!R)
		return NVRTC_ERROR_INTERNAL_ERROR;
	nvrtcResult r = R->nvrtcCreateProgram(&q->real, q->src, q->name, q->n_headers,
					      (const char *const *)q->headers,
					      (const char *const *)q->include_names);
	for (size_t i = 0; r == NVRTC_SUCCESS && i < q->n_exprs; i++)
		r = R->nvrtcAddNameExpression(q->real, q->exprs[i]);
	return r;
}

/* Moves q to REAL. A SERVED program is compiled again by the real library
 * with its options (what NVRTC holds after that compile). */
static nvrtcResult materialise(struct prog *q)
{
	if (q->state == ST_REAL)
		return NVRTC_SUCCESS;
	nvrtcResult r = real_of(q);
	if (r == NVRTC_SUCCESS && q->state == ST_SERVED) {
		jc__shim_count(JC_SHIM_MATERIALISED, NULL);
		r = jc__real()->nvrtcCompileProgram(q->real, q->n_opts,
						    (const char *const *)q->opts);
	}
	if (r == NVRTC_SUCCESS)
		q->state = ST_REAL;
	return r;
}

/* log with every JC_NAME_STANDIN replaced by the caller's program name,
 * kept in q->log; NULL when out of memory. */
static const char *renamed_log(struct prog *q, const char *log)
{
	return q->log ? q->log
		      : (q->log = jc__text_replace(log, JC_NAME_STANDIN, nvrtc_name(q), 0));
}

/*
 * Where an output of a SERVED program lives: *data and *size (borrowed from q),
 * or 1 when it must come from the real library (materialise). The rules for
 * what NVRTC 13 makes per target: an sm_ compile has cubin and PTX, a
 * compute_ compile PTX, a -dlto compile LTO-IR and an empty PTX ("", size
 * 1); other outputs are empty (size 0); none has OptiX-IR (-optix-ir passes
 * through).
 */
static int served(struct prog *q, enum out o, const void **data, size_t *size)
{
	jc_output have = jc_result_output(q->res);
	const void *d = NULL;
	size_t n = 0;
	switch (o) {
	case OUT_LOG:
		d = jc_result_log(q->res);
		if (strstr(d, LOG_TRUNCATED) || (q->canon && !(d = renamed_log(q, d))))
			return 1;
		n = strlen(d) + 1;
		break;
	case OUT_CUBIN:
		if (have == JC_CUBIN)
			d = jc_result_data(q->res, &n);
		break;
	case OUT_LTOIR:
		if (have == JC_LTOIR)
			d = jc_result_data(q->res, &n);
		break;
	case OUT_OPTIX:
		break;
	case OUT_PTX:
		if (have == JC_PTX) {
			d = jc_result_data(q->res, &n);
		} else if (have == JC_LTOIR) {
			d = "", n = 1;
		} else {
			if (!q->ptx) {
				jc_request_set_output(q->req, JC_PTX);
				if (jc__shim_ask(q->req, &q->ptx) != 0)
					return 1;
				jc__shim_count(JC_SHIM_LAZY, NULL);
			}
			d = jc_result_data(q->ptx, &n);
		}
		break;
	}
	*data = d;
	*size = n;
	return 0;
}

static nvrtcResult real_output(nvrtcProgram p, enum out o, int want_size, size_t *size_ret,
			       char *buf)
{
	const struct jc_real_nvrtc *R = jc__real();
	if (!R)
		return NVRTC_ERROR_INTERNAL_ERROR;
	switch (o) {
	case OUT_PTX:
		return want_size ? R->nvrtcGetPTXSize(p, size_ret) : R->nvrtcGetPTX(p, buf);
	case OUT_CUBIN:
		return want_size ? R->nvrtcGetCUBINSize(p, size_ret) : R->nvrtcGetCUBIN(p, buf);
	case OUT_LTOIR:
		return want_size ? R->nvrtcGetLTOIRSize(p, size_ret) : R->nvrtcGetLTOIR(p, buf);
	case OUT_OPTIX:
		return want_size ? R->nvrtcGetOptiXIRSize(p, size_ret) : R->nvrtcGetOptiXIR(p, buf);
	case OUT_LOG:
		break;
	}
	return want_size ? R->nvrtcGetProgramLogSize(p, size_ret) : R->nvrtcGetProgramLog(p, buf);
}

/* nvrtcGet<o>Size (want_size: into *size_ret) or nvrtcGet<o> (into buf). */
static nvrtcResult get_output(nvrtcProgram p, enum out o, int want_size, size_t *size_ret,
			      char *buf)
{
	struct prog *q = shim_prog(p);
	if (!q)
		return real_output(p, o, want_size, size_ret, buf);
	pthread_mutex_lock(&q->mu);
	nvrtcResult r = NVRTC_SUCCESS;
	const void *data;
	size_t n;
	if (q->state == ST_SERVED && (want_size ? !size_ret : !buf)) {
		r = NVRTC_ERROR_INVALID_INPUT;
	} else if (q->state == ST_SERVED && served(q, o, &data, &n) == 0) {
		if (want_size)
			*size_ret = n;
		else if (n)
			memcpy(buf, data, n);
	} else if ((r = q->state == ST_SERVED ? materialise(q) : real_of(q)) == NVRTC_SUCCESS) {
		r = real_output(q->real, o, want_size, size_ret, buf);
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

/* ---- library-level calls: always the real library's ------------------------- */

NVRTC_API const char *nvrtcGetErrorString(nvrtcResult result)
{
	const struct jc_real_nvrtc *R = jc__real();
	return R ? R->nvrtcGetErrorString(result) : "NVRTC_ERROR unknown";
}

NVRTC_API nvrtcResult nvrtcVersion(int *major, int *minor)
{
	REAL(nvrtcVersion, major, minor);
}

NVRTC_API nvrtcResult nvrtcGetNumSupportedArchs(int *numArchs)
{
	REAL(nvrtcGetNumSupportedArchs, numArchs);
}

NVRTC_API nvrtcResult nvrtcGetSupportedArchs(int *supportedArchs)
{
	REAL(nvrtcGetSupportedArchs, supportedArchs);
}

NVRTC_API nvrtcResult nvrtcGetPCHHeapSize(size_t *ret)
{
	REAL(nvrtcGetPCHHeapSize, ret);
}

NVRTC_API nvrtcResult nvrtcSetPCHHeapSize(size_t size)
{
	REAL(nvrtcSetPCHHeapSize, size);
}

/* ---- programs --------------------------------------------------------------- */

static void prog_free(struct prog *q)
{
	free(q->src);
	free(q->name);
	free_strv(q->headers, (size_t)q->n_headers);
	free_strv(q->include_names, (size_t)q->n_headers);
	free_strv(q->exprs, q->n_exprs);
	free_strv(q->opts, (size_t)q->n_opts);
	jc_request_free(q->req);
	jc_result_free(q->res);
	jc_result_free(q->ptx);
	free(q->log);
	pthread_mutex_destroy(&q->mu);
	q->magic = 0;
	free(q);
}

NVRTC_API nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
					 int numHeaders, const char *const *headers,
					 const char *const *includeNames)
{
	int odd = jc__shim_bypass() || !prog || !src || numHeaders < 0 ||
		  (numHeaders > 0 && (!headers || !includeNames));
	for (int i = 0; !odd && i < numHeaders; i++)
		odd = !headers[i] || !includeNames[i];
	if (odd && (jc__shim_bypass() || !prog))
		REAL(nvrtcCreateProgram, prog, src, name, numHeaders, headers, includeNames);
	struct prog *q = calloc(1, sizeof(*q));
	if (!q)
		return NVRTC_ERROR_OUT_OF_MEMORY;
	q->magic = PROG_MAGIC;
	pthread_mutex_init(&q->mu, NULL);
	if (odd) {
		/* Arguments NVRTC judges itself: whatever it makes, the program is its. */
		const struct jc_real_nvrtc *R = jc__real();
		nvrtcResult r = R ? R->nvrtcCreateProgram(&q->real, src, name, numHeaders, headers,
							  includeNames)
				  : NVRTC_ERROR_INTERNAL_ERROR;
		if (r != NVRTC_SUCCESS) {
			prog_free(q);
			return r;
		}
		q->state = ST_REAL;
		*prog = (nvrtcProgram)q;
		return NVRTC_SUCCESS;
	}
	int ok = 1;
	q->src = dup_or_null(src, &ok);
	q->name = dup_or_null(name, &ok);
	q->n_headers = numHeaders;
	if (numHeaders > 0) {
		q->headers = calloc((size_t)numHeaders, sizeof(char *));
		q->include_names = calloc((size_t)numHeaders, sizeof(char *));
		ok &= q->headers && q->include_names;
		for (int i = 0; ok && i < numHeaders; i++) {
			q->headers[i] = dup_or_null(headers[i], &ok);
			q->include_names[i] = dup_or_null(includeNames[i], &ok);
		}
	}
	if (!ok) {
		prog_free(q);
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	*prog = (nvrtcProgram)q;
	return NVRTC_SUCCESS;
}

NVRTC_API nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
	struct prog *q = prog ? shim_prog(*prog) : NULL;
	if (!q)
		REAL(nvrtcDestroyProgram, prog);
	nvrtcResult r = NVRTC_SUCCESS;
	if (q->real)
		r = jc__real()->nvrtcDestroyProgram(&q->real);
	prog_free(q);
	*prog = NULL;
	return r;
}

NVRTC_API nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *const name_expression)
{
	struct prog *q = shim_prog(prog);
	if (!q)
		REAL(nvrtcAddNameExpression, prog, name_expression);
	pthread_mutex_lock(&q->mu);
	nvrtcResult r;
	if (q->state == ST_SERVED) {
		r = name_expression ? NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION
				    : NVRTC_ERROR_INVALID_INPUT;
	} else if (q->state == ST_REAL || !name_expression) {
		r = real_of(q);
		r = r ?: jc__real()->nvrtcAddNameExpression(q->real, name_expression);
	} else {
		char **v = realloc(q->exprs, (q->n_exprs + 1) * sizeof(char *));
		char *e = strdup(name_expression);
		if (v)
			q->exprs = v;
		if (!v || !e) {
			free(e);
			r = NVRTC_ERROR_OUT_OF_MEMORY;
		} else {
			q->exprs[q->n_exprs++] = e;
			r = q->real ? jc__real()->nvrtcAddNameExpression(q->real, e)
				    : NVRTC_SUCCESS;
		}
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

static int is_header(const struct prog *q, const char *name, size_t len)
{
	for (int i = 0; i < q->n_headers; i++)
		if (strlen(q->include_names[i]) == len && !strncmp(q->include_names[i], name, len))
			return 1;
	return 0;
}

/* 1 when file inc (len bytes) exists relative to the program's directory:
 * the directory part of its name, else the working directory. */
static int in_program_dir(const struct prog *q, const char *inc, size_t len)
{
	const char *name = nvrtc_name(q), *slash = strrchr(name, '/');
	char path[PATH_MAX];
	if (*inc == '/')
		return 0; /* absolute: the daemon reads and keys it */
	int n = slash ? snprintf(path, sizeof(path), "%.*s/%.*s", (int)(slash - name), name,
				 (int)len, inc)
		      : snprintf(path, sizeof(path), "%.*s", (int)len, inc);
	return n < 0 || (size_t)n >= sizeof(path) || access(path, F_OK) == 0;
}

/* 1 when text has an #include "X" that no in-memory header answers and that
 * NVRTC would find in the program's directory, or a computed #include
 * (which may expand to such a one). A superset: comments and conditionals
 * are not looked at. Checked at every compile, so a header that appears
 * there later is seen. */
static int program_dir_include(const struct prog *q, const char *text)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		p += strspn(p, " \t");
		if (*p != '#')
			continue;
		p += 1 + strspn(p + 1, " \t");
		if (strncmp(p, "include", 7) != 0)
			continue;
		p += 7 + strspn(p + 7, " \t");
		if (*p == '<')
			continue;
		const char *end = *p == '"' ? strchr(p + 1, '"') : NULL;
		if (!end || memchr(p + 1, '\n', (size_t)(end - p - 1)))
			return 1;
		size_t len = (size_t)(end - p - 1);
		if (!is_header(q, p + 1, len) && in_program_dir(q, p + 1, len))
			return 1;
	}
	return 0;
}

static int quoted_include(const struct prog *q)
{
	if (program_dir_include(q, q->src))
		return 1;
	for (int i = 0; i < q->n_headers; i++)
		if (program_dir_include(q, q->headers[i]))
			return 1;
	return 0;
}

static int mentions_file(const char *text)
{
	return strstr(text, "__FILE__") || strstr(text, "__BASE_FILE__") ||
	       strstr(text, "__FILE_NAME__") || strstr(text, "__builtin_FILE");
}

/* The program name can reach the artifact only as text the daemon finds
 * (core/progname.h): no __FILE__-like macro or __builtin_FILE() in the
 * source or the in-memory headers, where it could enter otherwise
 * (sizeof(__FILE__), a constexpr sum of __builtin_FILE()'s characters). A header
 * read from an include directory that expands one in the source (assert,
 * a __builtin_FILE() default argument: CUB) puts it there as text. */
static int name_free(const struct prog *q)
{
	if (mentions_file(q->src))
		return 0;
	for (int i = 0; i < q->n_headers; i++)
		if (mentions_file(q->headers[i]))
			return 0;
	return 1;
}

/* Fills r with q's source (under name), headers and name expressions; 0 or
 * the client library's code (JC_ENOMEM, JC_EINVAL for what it refuses). */
static int request_of(const struct prog *q, const char *name, jc_request *r)
{
	int rc = jc_request_set_source(r, name, q->src, strlen(q->src));
	for (int i = 0; rc == 0 && i < q->n_headers; i++)
		rc = jc_request_add_header(r, q->include_names[i], q->headers[i],
					   strlen(q->headers[i]));
	for (size_t i = 0; rc == 0 && i < q->n_exprs; i++)
		rc = jc_request_add_name_expression(r, q->exprs[i]);
	return rc;
}

static int save_options(struct prog *q, int n, const char *const *opts)
{
	if (n <= 0 || !opts)
		return 0;
	q->opts = calloc((size_t)n, sizeof(char *));
	if (!q->opts)
		return -1;
	q->n_opts = n;
	int ok = 1;
	for (int i = 0; i < n; i++)
		q->opts[i] = dup_or_null(opts[i], &ok);
	return ok ? 0 : -1;
}

/* Compiles q (NEW) through jitcached; 0 when served, else why not (*ctr
 * names the counter to bump). */
static const char *serve(struct prog *q, int n, const char *const *opts, enum jc_shim_counter *ctr)
{
	static __thread char why[512];
	*ctr = JC_SHIM_PASSTHROUGH;
	if (q->flow)
		return "a flow callback is set";
	if (save_options(q, n, opts) != 0)
		return "out of memory";
	if (quoted_include(q))
		return "a quoted #include found in the program's directory (NVRTC searches it "
		       "first)";
	int name_matters, rc = jc_request_new(&q->req);
	if (rc != 0)
		return "out of memory";
	const char *reason = jc__shim_plan(opts, n, q->req, &name_matters, why, sizeof(why));
	if (reason)
		return reason;
	q->canon = !name_matters && name_free(q);
	if ((rc = request_of(q, nvrtc_name(q), q->req)) != 0 ||
	    (q->canon && (rc = jc__request_set_name_free(q->req)) != 0)) {
		snprintf(why, sizeof(why), "the client library refused the program: %s",
			 jc_strerror(rc));
		return why;
	}
	rc = jc__shim_ask(q->req, &q->res);
	if (rc == 0) {
		jc_cache_status st = jc_result_cache_status(q->res);
		/* A remote hit ran no compile; a daemon's uncached result (it has a
		 * key) did, as a miss does. */
		*ctr = st == JC_HIT || st == JC_REMOTE_HIT	      ? JC_SHIM_HITS
		       : st == JC_JOINED			      ? JC_SHIM_JOINED
		       : st == JC_UNCACHED && !*jc_result_key(q->res) ? JC_SHIM_UNAVAILABLE
								      : JC_SHIM_MISSES;
		return NULL;
	}
	*ctr = rc == JC_ECOMPILE   ? JC_SHIM_FAILED
	       : rc == JC_ECONNECT ? JC_SHIM_UNAVAILABLE
				   : JC_SHIM_REFUSED;
	/* JC_EVERSION: the daemon's NVRTC is another build than the real
	 * library here (req.h, nvrtc_id): compiled here, never its bytes. */
	snprintf(why, sizeof(why), "jitcached: %s",
		 rc == JC_EVERSION ? "another NVRTC build than the application's"
				   : jc_strerror(rc));
	return why;
}

NVRTC_API nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions,
					  const char *const *options)
{
	struct prog *q = shim_prog(prog);
	if (!q)
		REAL(nvrtcCompileProgram, prog, numOptions, options);
	pthread_mutex_lock(&q->mu);
	jc__shim_count(JC_SHIM_COMPILES, NULL);
	nvrtcResult r = NVRTC_SUCCESS;
	enum jc_shim_counter ctr;
	const char *reason = NULL;
	if (q->state != ST_NEW) {
		/* A second compile of one program: NVRTC's own business. */
		r = materialise(q);
		ctr = JC_SHIM_PASSTHROUGH;
		reason = "a program compiled twice";
	} else if (!(reason = serve(q, numOptions, options, &ctr))) {
		q->state = ST_SERVED;
	}
	jc__shim_count(
	    ctr, reason ? reason
		 : ctr == JC_SHIM_UNAVAILABLE
		     ? "no jitcached answered: compiled in process by the client library's fallback"
		     : NULL);
	if (reason && r == NVRTC_SUCCESS) {
		r = real_of(q);
		r = r ?: jc__real()->nvrtcCompileProgram(q->real, numOptions, options);
		q->state = ST_REAL;
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

NVRTC_API nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet)
{
	return get_output(prog, OUT_PTX, 1, ptxSizeRet, NULL);
}

NVRTC_API nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx)
{
	return get_output(prog, OUT_PTX, 0, NULL, ptx);
}

NVRTC_API nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet)
{
	return get_output(prog, OUT_CUBIN, 1, cubinSizeRet, NULL);
}

NVRTC_API nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin)
{
	return get_output(prog, OUT_CUBIN, 0, NULL, cubin);
}

NVRTC_API nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t *LTOIRSizeRet)
{
	return get_output(prog, OUT_LTOIR, 1, LTOIRSizeRet, NULL);
}

NVRTC_API nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char *LTOIR)
{
	return get_output(prog, OUT_LTOIR, 0, NULL, LTOIR);
}

NVRTC_API nvrtcResult nvrtcGetOptiXIRSize(nvrtcProgram prog, size_t *optixirSizeRet)
{
	return get_output(prog, OUT_OPTIX, 1, optixirSizeRet, NULL);
}

NVRTC_API nvrtcResult nvrtcGetOptiXIR(nvrtcProgram prog, char *optixir)
{
	return get_output(prog, OUT_OPTIX, 0, NULL, optixir);
}

NVRTC_API nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet)
{
	return get_output(prog, OUT_LOG, 1, logSizeRet, NULL);
}

NVRTC_API nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log)
{
	return get_output(prog, OUT_LOG, 0, NULL, log);
}

NVRTC_API nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *const name_expression,
					  const char **lowered_name)
{
	struct prog *q = shim_prog(prog);
	if (!q)
		REAL(nvrtcGetLoweredName, prog, name_expression, lowered_name);
	pthread_mutex_lock(&q->mu);
	nvrtcResult r;
	if (q->state == ST_SERVED) {
		const char *l =
		    name_expression ? jc_result_lowered_name(q->res, name_expression) : NULL;
		r = !name_expression || !lowered_name ? NVRTC_ERROR_INVALID_INPUT
		    : !l			      ? NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID
						      : NVRTC_SUCCESS;
		if (l && lowered_name)
			*lowered_name = l;
	} else {
		r = real_of(q);
		r = r ?: jc__real()->nvrtcGetLoweredName(q->real, name_expression, lowered_name);
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

/* PCH state and the flow callback belong to the real program; for a SERVED
 * one the uncompiled real program answers as NVRTC does after a compile
 * without PCH (conformance table). */
static nvrtcResult with_real(nvrtcProgram prog, nvrtcResult (*call)(nvrtcProgram, void *, void *),
			     void *a, void *b, int flow)
{
	struct prog *q = shim_prog(prog);
	if (!q)
		return call(prog, a, b);
	pthread_mutex_lock(&q->mu);
	nvrtcResult r = real_of(q);
	q->flow |= flow;
	r = r ?: call(q->real, a, b);
	pthread_mutex_unlock(&q->mu);
	return r;
}

static nvrtcResult call_pch_status(nvrtcProgram p, void *a, void *b)
{
	(void)a, (void)b;
	REAL(nvrtcGetPCHCreateStatus, p);
}

static nvrtcResult call_pch_required(nvrtcProgram p, void *size, void *b)
{
	(void)b;
	REAL(nvrtcGetPCHHeapSizeRequired, p, size);
}

struct flow {
	int (*callback)(void *, void *);
};

static nvrtcResult call_flow(nvrtcProgram p, void *cb, void *payload)
{
	REAL(nvrtcSetFlowCallback, p, ((struct flow *)cb)->callback, payload);
}

NVRTC_API nvrtcResult nvrtcGetPCHCreateStatus(nvrtcProgram prog)
{
	return with_real(prog, call_pch_status, NULL, NULL, 0);
}

NVRTC_API nvrtcResult nvrtcGetPCHHeapSizeRequired(nvrtcProgram prog, size_t *size)
{
	return with_real(prog, call_pch_required, size, NULL, 0);
}

NVRTC_API nvrtcResult nvrtcSetFlowCallback(nvrtcProgram prog, int (*callback)(void *, void *),
					   void *payload)
{
	struct flow f = {callback};
	return with_real(prog, call_flow, &f, payload, callback != NULL);
}
