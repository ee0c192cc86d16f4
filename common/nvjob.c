/* SPDX-License-Identifier: MIT */
/* One NVRTC / nvJitLink job through a struct jc_nv: see nvjob.h. */
#include "common/nvjob.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "jitcache/jitcache.h"

void jc__nv_set_message(struct jc_res *res, int status, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	res->status = status;
	free(res->message);
	res->message = strdup(buf);
}

/* Appends text to res->log (the log of every stage is kept), up to JC_NV_JC_NV_LOG_MAX. */
static void append_log(struct jc_res *res, const char *text, size_t len)
{
	static const char cut[] = "\n[jitcache: log truncated]\n";
	size_t old = res->log ? strlen(res->log) : 0;
	if (old >= JC_NV_LOG_MAX)
		return;
	if (len > JC_NV_LOG_MAX - old)
		len = JC_NV_LOG_MAX - old;
	int truncated = old + len == JC_NV_LOG_MAX;
	char *p = realloc(res->log, old + len + sizeof(cut));
	if (!p)
		return;
	memcpy(p + old, text, len);
	p[old + len] = '\0';
	if (truncated)
		memcpy(p + old + len, cut, sizeof(cut));
	res->log = p;
}

/*
 * NVRTC result classes. Deterministic failures of the input (a compile error,
 * a bad option or name expression) become JC_ECOMPILE and may be negative-
 * cached; resource and internal failures never are.
 */
static int nvrtc_status(nvrtcResult r)
{
	switch (r) {
	case NVRTC_SUCCESS:
		return 0;
	case NVRTC_ERROR_OUT_OF_MEMORY:
		return JC_ENOMEM;
	case NVRTC_ERROR_COMPILATION:
	case NVRTC_ERROR_INVALID_OPTION:
	case NVRTC_ERROR_INVALID_INPUT:
	case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
	case NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION:
	case NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION:
		return JC_ECOMPILE;
	default:
		return JC_EINTERNAL;
	}
}

/* The enumerator's name (nvJitLink.h of CUDA 13.0, which has no error-string call). */
static const char *nvjitlink_name(nvJitLinkResult r)
{
	switch (r) {
#define N(x)                                                                                       \
	case x:                                                                                    \
		return #x
		N(NVJITLINK_SUCCESS);
		N(NVJITLINK_ERROR_UNRECOGNIZED_OPTION);
		N(NVJITLINK_ERROR_MISSING_ARCH);
		N(NVJITLINK_ERROR_INVALID_INPUT);
		N(NVJITLINK_ERROR_PTX_COMPILE);
		N(NVJITLINK_ERROR_NVVM_COMPILE);
		N(NVJITLINK_ERROR_INTERNAL);
		N(NVJITLINK_ERROR_THREADPOOL);
		N(NVJITLINK_ERROR_UNRECOGNIZED_INPUT);
		N(NVJITLINK_ERROR_FINALIZE);
		N(NVJITLINK_ERROR_NULL_INPUT);
		N(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS);
		N(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE);
		N(NVJITLINK_ERROR_ARCH_MISMATCH);
		N(NVJITLINK_ERROR_OUTDATED_LIBRARY);
		N(NVJITLINK_ERROR_MISSING_FATBIN);
		N(NVJITLINK_ERROR_UNRECOGNIZED_ARCH);
		N(NVJITLINK_ERROR_UNSUPPORTED_ARCH);
		N(NVJITLINK_ERROR_LTO_NOT_ENABLED);
#undef N
	}
	return "unknown nvJitLink error";
}

static int nvjitlink_status(nvJitLinkResult r)
{
	switch (r) {
	case NVJITLINK_SUCCESS:
		return 0;
	case NVJITLINK_ERROR_INTERNAL:
	case NVJITLINK_ERROR_THREADPOOL:
		return JC_EINTERNAL;
	default:
		return JC_ECOMPILE;
	}
}

/* Fetches one of NVRTC's outputs into res->data. */
static int nvrtc_output(const struct jc_nv *nv, nvrtcProgram prog, uint32_t output,
			struct jc_res *res)
{
	nvrtcResult (*get_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get)(nvrtcProgram, char *);
	switch (output) {
	case JC_OUTPUT_CUBIN:
		get_size = nv->nvrtcGetCUBINSize, get = nv->nvrtcGetCUBIN;
		break;
	case JC_OUTPUT_PTX:
		get_size = nv->nvrtcGetPTXSize, get = nv->nvrtcGetPTX;
		break;
	default:
		get_size = nv->nvrtcGetLTOIRSize, get = nv->nvrtcGetLTOIR;
		break;
	}
	size_t size = 0;
	nvrtcResult r = get_size(prog, &size);
	if (r == NVRTC_SUCCESS && size == 0)
		r = NVRTC_ERROR_INVALID_OPTION;
	if (r != NVRTC_SUCCESS) {
		jc__nv_set_message(res, nvrtc_status(r),
				   "NVRTC produced no %s for this architecture: %s",
				   jc__output_name(output), nv->nvrtcGetErrorString(r));
		return res->status;
	}
	res->data = malloc(size);
	if (!res->data) {
		jc__nv_set_message(res, JC_ENOMEM, "out of memory for a %zu-byte artifact", size);
		return res->status;
	}
	r = get(prog, (char *)res->data);
	if (r != NVRTC_SUCCESS) {
		jc__nv_set_message(res, nvrtc_status(r), "NVRTC: %s", nv->nvrtcGetErrorString(r));
		return res->status;
	}
	res->size = size;
	res->output = output;
	return 0;
}

static int nvrtc_compile(const struct jc_nv *nv, const struct jc_req *req, uint32_t output,
			 struct jc_res *res)
{
	int rc = JC_ENOMEM;
	const char **hdr_src = calloc(req->n_headers + 1, sizeof(char *));
	const char **hdr_name = calloc(req->n_headers + 1, sizeof(char *));
	const char **opts = calloc(req->options.n + 2, sizeof(char *));
	char *src = malloc(req->source_size + 1);
	char arch_opt[64];
	nvrtcProgram prog = NULL;
	if (!hdr_src || !hdr_name || !opts || !src)
		goto out;
	/* NVRTC takes NUL-terminated source and header strings. */
	memcpy(src, req->source, req->source_size);
	src[req->source_size] = '\0';
	for (size_t i = 0; i < req->n_headers; i++) {
		char *h = malloc(req->headers[i].size + 1);
		if (!h)
			goto out;
		memcpy(h, req->headers[i].data, req->headers[i].size);
		h[req->headers[i].size] = '\0';
		hdr_src[i] = h;
		hdr_name[i] = req->headers[i].name;
	}
	size_t n_opts = 0;
	for (size_t i = 0; i < req->options.n; i++)
		opts[n_opts++] = req->options.v[i];
	snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", req->arch);
	opts[n_opts++] = arch_opt;
	if (output == JC_OUTPUT_LTOIR)
		opts[n_opts++] = "-dlto";

	nvrtcResult r = nv->nvrtcCreateProgram(&prog, src, req->source_name, (int)req->n_headers,
					       hdr_src, hdr_name);
	for (size_t i = 0; r == NVRTC_SUCCESS && i < req->name_exprs.n; i++)
		r = nv->nvrtcAddNameExpression(prog, req->name_exprs.v[i]);
	if (r != NVRTC_SUCCESS) {
		jc__nv_set_message(res, nvrtc_status(r), "NVRTC could not create the program: %s",
				   nv->nvrtcGetErrorString(r));
		rc = res->status;
		goto out;
	}
	uint64_t t0 = jc__now_ns(), c0 = jc__process_cpu_ns();
	r = nv->nvrtcCompileProgram(prog, (int)n_opts, opts);
	res->compile_ns += jc__now_ns() - t0;
	res->cpu_ns += jc__process_cpu_ns() - c0;
	size_t log_size = 0;
	if (nv->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
		char *log = malloc(log_size);
		if (log && nv->nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
			append_log(res, log, strnlen(log, log_size));
		free(log);
	}
	if (r != NVRTC_SUCCESS) {
		jc__nv_set_message(res, nvrtc_status(r), "NVRTC compile of %s for %s failed: %s",
				   req->source_name, req->arch, nv->nvrtcGetErrorString(r));
		rc = res->status;
		goto out;
	}
	res->lowered = calloc(req->name_exprs.n + 1, sizeof(*res->lowered));
	if (!res->lowered)
		goto out;
	for (size_t i = 0; i < req->name_exprs.n; i++) {
		const char *lowered = NULL;
		r = nv->nvrtcGetLoweredName(prog, req->name_exprs.v[i], &lowered);
		if (r != NVRTC_SUCCESS) {
			jc__nv_set_message(res, nvrtc_status(r), "no lowered name for %s: %s",
					   req->name_exprs.v[i], nv->nvrtcGetErrorString(r));
			rc = res->status;
			goto out;
		}
		res->lowered[i].expr = strdup(req->name_exprs.v[i]);
		res->lowered[i].lowered = strdup(lowered);
		res->n_lowered++;
		if (!res->lowered[i].expr || !res->lowered[i].lowered)
			goto out;
	}
	rc = nvrtc_output(nv, prog, output, res);
out:
	if (rc == JC_ENOMEM && res->status == 0)
		jc__nv_set_message(res, JC_ENOMEM, "out of memory");
	if (prog)
		nv->nvrtcDestroyProgram(&prog);
	for (size_t i = 0; hdr_src && i < req->n_headers; i++)
		free((char *)hdr_src[i]);
	free(hdr_src);
	free(hdr_name);
	free(opts);
	free(src);
	return rc;
}

/* Appends nvJitLink's error log, then its info log; returns the error log's length. */
static size_t nvjitlink_logs(const struct jc_nv *nv, nvJitLinkHandle h, struct jc_res *res)
{
	size_t size = 0, err_len = 0;
	if (nv->nvJitLinkGetErrorLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
		char *log = malloc(size);
		if (log && nv->nvJitLinkGetErrorLog(h, log) == NVJITLINK_SUCCESS) {
			err_len = strnlen(log, size);
			append_log(res, log, err_len);
		}
		free(log);
	}
	if (nv->nvJitLinkGetInfoLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
		char *log = malloc(size);
		if (log && nv->nvJitLinkGetInfoLog(h, log) == NVJITLINK_SUCCESS)
			append_log(res, log, strnlen(log, size));
		free(log);
	}
	return err_len;
}

/* Puts "jitcache: MESSAGE" before the log, so that it is stored with it. */
static void prepend_message(struct jc_res *res)
{
	char *old = res->log;
	if (asprintf(&res->log, "jitcache: %s\n%s", res->message, old ? old : "") < 0) {
		res->log = old;
		return;
	}
	free(old);
}

/* 1 when the request's link options hold opt. */
static int has_link_option(const struct jc_req *req, const char *opt)
{
	for (size_t i = 0; i < req->link_options.n; i++)
		if (strcmp(req->link_options.v[i], opt) == 0)
			return 1;
	return 0;
}

/*
 * Links the request's inputs (after an LTO-IR produced by the compile stage,
 * when there is one, which res->data holds on entry) with nvJitLink. Adds
 * "-lto" when an input is LTO-IR, and "-ptx" for PTX output (nvJitLink API
 * reference: linked PTX exists only with -lto, and -ptx stops there; then
 * every input must hold LTO-IR).
 */
static int nvjitlink_link(const struct jc_nv *nv, const struct jc_req *req, struct jc_res *res)
{
	int lto = req->job == JC_JOB_COMPILE_LINK;
	for (size_t i = 0; i < req->n_link_inputs; i++)
		lto |= req->link_inputs[i].type == JC_INPUT_LTOIR;
	lto &= !has_link_option(req, "-lto");
	int ptx = req->output == JC_OUTPUT_PTX;
	const char **opts = calloc(req->link_options.n + 3, sizeof(char *));
	char arch_opt[64];
	nvJitLinkHandle h = NULL;
	if (!opts) {
		jc__nv_set_message(res, JC_ENOMEM, "out of memory");
		return res->status;
	}
	size_t n_opts = 0;
	snprintf(arch_opt, sizeof(arch_opt), "-arch=%s", req->arch);
	opts[n_opts++] = arch_opt;
	if (lto)
		opts[n_opts++] = "-lto";
	if (ptx && !has_link_option(req, "-ptx"))
		opts[n_opts++] = "-ptx";
	for (size_t i = 0; i < req->link_options.n; i++)
		opts[n_opts++] = req->link_options.v[i];
	uint64_t t0 = jc__now_ns(), c0 = jc__process_cpu_ns();
	nvJitLinkResult r = nv->nvJitLinkCreate(&h, (uint32_t)n_opts, opts);
	if (r == NVJITLINK_SUCCESS && res->data)
		r = nv->nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, res->data, res->size,
					 req->source_name);
	for (size_t i = 0; r == NVJITLINK_SUCCESS && i < req->n_link_inputs; i++) {
		const struct jc_blob *in = &req->link_inputs[i];
		r = nv->nvJitLinkAddData(h, (nvJitLinkInputType)in->type, in->data, in->size,
					 in->name);
		unsigned maj = 0, min = 0;
		/* nvJitLink 13.0 answers OUTDATED_LIBRARY for LTO-IR whose NVVM
		 * container or IR version is newer than its own (tried by raising
		 * those header fields of NVRTC's output; older ones are accepted). */
		if (r == NVJITLINK_ERROR_OUTDATED_LIBRARY && nv->nvJitLinkVersion(&maj, &min) == 0)
			jc__nv_set_message(
			    res, JC_ECOMPILE,
			    "link input %s (%s) holds LTO-IR from a newer CUDA toolkit than this "
			    "nvJitLink %u.%u accepts (%s): rebuild it with CUDA %u.%u, or update "
			    "the toolkit the daemon uses",
			    in->name, jc__input_type_name(in->type), maj, min, nvjitlink_name(r),
			    maj, min);
		else if (r != NVJITLINK_SUCCESS)
			jc__nv_set_message(res, nvjitlink_status(r),
					   "nvJitLink refused link input %s (%s): %s", in->name,
					   jc__input_type_name(in->type), nvjitlink_name(r));
	}
	if (r == NVJITLINK_SUCCESS)
		r = nv->nvJitLinkComplete(h);
	res->compile_ns += jc__now_ns() - t0;
	res->cpu_ns += jc__process_cpu_ns() - c0;
	size_t err_len = h ? nvjitlink_logs(nv, h, res) : 0;
	/* nvJitLink 13.0 reports an undefined reference (a PTX input calling a
	 * function no input defines) as NVJITLINK_ERROR_INTERNAL, with "error :
	 * Undefined reference to ..." in its error log: an internal error that
	 * explains itself is a link error of the input. */
	int internal_explained = r == NVJITLINK_ERROR_INTERNAL && err_len > 0;
	free(res->data);
	res->data = NULL;
	res->size = 0;
	size_t size = 0;
	if (r == NVJITLINK_SUCCESS)
		r = ptx ? nv->nvJitLinkGetLinkedPtxSize(h, &size)
			: nv->nvJitLinkGetLinkedCubinSize(h, &size);
	if (r == NVJITLINK_SUCCESS && !(res->data = malloc(size ? size : 1)))
		jc__nv_set_message(res, JC_ENOMEM, "out of memory");
	if (r == NVJITLINK_SUCCESS && res->data)
		r = ptx ? nv->nvJitLinkGetLinkedPtx(h, (char *)res->data)
			: nv->nvJitLinkGetLinkedCubin(h, res->data);
	if (r != NVJITLINK_SUCCESS && res->status == 0)
		jc__nv_set_message(res, internal_explained ? JC_ECOMPILE : nvjitlink_status(r),
				   "nvJitLink link for %s failed: %s (see the log)", req->arch,
				   nvjitlink_name(r));
	if (res->status == JC_ECOMPILE)
		prepend_message(res);
	if (res->status == 0) {
		res->size = size;
		res->output = ptx ? JC_OUTPUT_PTX : JC_OUTPUT_CUBIN;
	}
	if (h)
		nv->nvJitLinkDestroy(&h);
	free(opts);
	return res->status;
}

int jc__nv_run_job(const struct jc_nv *nv, const struct jc_req *req, struct jc_res *res)
{
	res->output = req->output;
	if (req->output == JC_OUTPUT_FATBIN) {
		/* jitcached makes one from per-target jobs (core/fatbin.h). */
		jc__nv_set_message(res, JC_ENOTSUP,
				   "a fatbin (target list %s) is made by jitcached, "
				   "not by one compile job",
				   req->arch ? req->arch : "");
		return res->status;
	}
	if (req->job != JC_JOB_COMPILE && !nv->has_nvjitlink) {
		jc__nv_set_message(res, JC_ENOTSUP, "cannot link here: %s", nv->why_no_nvjitlink);
		return res->status;
	}
	if (req->job == JC_JOB_COMPILE)
		nvrtc_compile(nv, req, req->output, res);
	else if (req->job != JC_JOB_COMPILE_LINK ||
		 nvrtc_compile(nv, req, JC_OUTPUT_LTOIR, res) == 0)
		nvjitlink_link(nv, req, res);
	return res->status;
}
