/* SPDX-License-Identifier: MIT */
/*
 * jitcache-worker: the compile worker process. jitcached starts a pool of
 * them; each reads COMPILE frames on fd 0 (a socketpair with the daemon),
 * runs NVRTC and/or nvJitLink in a confined process (the helper for jobs
 * without include directories, else a child forked for the job; their file
 * accesses recorded: worker_fs.h), which writes one RESULT frame (artifact
 * bytes inline, the record of what NVRTC read) per request. A crash, hang or
 * memory blow-up here costs the daemon one worker, never its own life: it
 * kills and replaces us.
 *
 * Usage: jitcache-worker [--memory-limit BYTES] [--confine MODE]   (not for humans; see worker.h)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "jitcache/jitcache.h"
#include "log.h"
#include "proto.h"
#include "req.h"
#include "worker.h"
#include "worker_fs.h"

/* --memory-limit: bytes of address space allowed beyond the start-up size (0: none). */
static uint64_t mem_limit;
/* --confine: enum jc_confine, applied in the helper and each job's child. */
static int confine_mode = JC_CONFINE_NONE;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_message(struct jc_res *res, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_message(struct jc_res *res, int status, const char *fmt, ...)
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

/* Appends text to res->log (the log of every stage is kept). */
/* A log past this is cut (its head kept, with a note): logs travel in frames
 * and live in the index, and a compiler can print without bound. */
#define LOG_MAX (4u << 20)

static void append_log(struct jc_res *res, const char *text, size_t len)
{
	static const char cut[] = "\n[jitcache: log truncated]\n";
	size_t old = res->log ? strlen(res->log) : 0;
	if (old >= LOG_MAX)
		return;
	if (len > LOG_MAX - old)
		len = LOG_MAX - old;
	int truncated = old + len == LOG_MAX;
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
#define N(x) case x: return #x;
	N(NVJITLINK_SUCCESS) N(NVJITLINK_ERROR_UNRECOGNIZED_OPTION) N(NVJITLINK_ERROR_MISSING_ARCH)
	N(NVJITLINK_ERROR_INVALID_INPUT) N(NVJITLINK_ERROR_PTX_COMPILE)
	N(NVJITLINK_ERROR_NVVM_COMPILE) N(NVJITLINK_ERROR_INTERNAL) N(NVJITLINK_ERROR_THREADPOOL)
	N(NVJITLINK_ERROR_UNRECOGNIZED_INPUT) N(NVJITLINK_ERROR_FINALIZE)
	N(NVJITLINK_ERROR_NULL_INPUT) N(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS)
	N(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE) N(NVJITLINK_ERROR_ARCH_MISMATCH)
	N(NVJITLINK_ERROR_OUTDATED_LIBRARY) N(NVJITLINK_ERROR_MISSING_FATBIN)
	N(NVJITLINK_ERROR_UNRECOGNIZED_ARCH) N(NVJITLINK_ERROR_UNSUPPORTED_ARCH)
	N(NVJITLINK_ERROR_LTO_NOT_ENABLED)
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
static int nvrtc_output(nvrtcProgram prog, uint32_t output, struct jc_res *res)
{
	nvrtcResult (*get_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get)(nvrtcProgram, char *);
	switch (output) {
	case JC_OUTPUT_CUBIN:
		get_size = nvrtcGetCUBINSize, get = nvrtcGetCUBIN;
		break;
	case JC_OUTPUT_PTX:
		get_size = nvrtcGetPTXSize, get = nvrtcGetPTX;
		break;
	default:
		get_size = nvrtcGetLTOIRSize, get = nvrtcGetLTOIR;
		break;
	}
	size_t size = 0;
	nvrtcResult r = get_size(prog, &size);
	if (r == NVRTC_SUCCESS && size == 0)
		r = NVRTC_ERROR_INVALID_OPTION;
	if (r != NVRTC_SUCCESS) {
		set_message(res, nvrtc_status(r), "NVRTC produced no %s for this architecture: %s",
			    jc__output_name(output), nvrtcGetErrorString(r));
		return res->status;
	}
	res->data = malloc(size);
	if (!res->data) {
		set_message(res, JC_ENOMEM, "out of memory for a %zu-byte artifact", size);
		return res->status;
	}
	r = get(prog, (char *)res->data);
	if (r != NVRTC_SUCCESS) {
		set_message(res, nvrtc_status(r), "NVRTC: %s", nvrtcGetErrorString(r));
		return res->status;
	}
	res->size = size;
	res->output = output;
	return 0;
}

static int nvrtc_compile(const struct jc_req *req, uint32_t output, struct jc_res *res)
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

	nvrtcResult r = nvrtcCreateProgram(&prog, src, req->source_name, (int)req->n_headers,
					   hdr_src, hdr_name);
	for (size_t i = 0; r == NVRTC_SUCCESS && i < req->name_exprs.n; i++)
		r = nvrtcAddNameExpression(prog, req->name_exprs.v[i]);
	if (r != NVRTC_SUCCESS) {
		set_message(res, nvrtc_status(r), "NVRTC could not create the program: %s",
			    nvrtcGetErrorString(r));
		rc = res->status;
		goto out;
	}
	uint64_t t0 = now_ns();
	r = nvrtcCompileProgram(prog, (int)n_opts, opts);
	res->compile_ns += now_ns() - t0;
	size_t log_size = 0;
	if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
		char *log = malloc(log_size);
		if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
			append_log(res, log, strnlen(log, log_size));
		free(log);
	}
	if (r != NVRTC_SUCCESS) {
		set_message(res, nvrtc_status(r), "NVRTC compile of %s for %s failed: %s",
			    req->source_name, req->arch, nvrtcGetErrorString(r));
		rc = res->status;
		goto out;
	}
	res->lowered = calloc(req->name_exprs.n + 1, sizeof(*res->lowered));
	if (!res->lowered)
		goto out;
	for (size_t i = 0; i < req->name_exprs.n; i++) {
		const char *lowered = NULL;
		r = nvrtcGetLoweredName(prog, req->name_exprs.v[i], &lowered);
		if (r != NVRTC_SUCCESS) {
			set_message(res, nvrtc_status(r), "no lowered name for %s: %s",
				    req->name_exprs.v[i], nvrtcGetErrorString(r));
			rc = res->status;
			goto out;
		}
		res->lowered[i].expr = strdup(req->name_exprs.v[i]);
		res->lowered[i].lowered = strdup(lowered);
		res->n_lowered++;
		if (!res->lowered[i].expr || !res->lowered[i].lowered)
			goto out;
	}
	rc = nvrtc_output(prog, output, res);
out:
	if (rc == JC_ENOMEM && res->status == 0)
		set_message(res, JC_ENOMEM, "worker out of memory");
	if (prog)
		nvrtcDestroyProgram(&prog);
	for (size_t i = 0; hdr_src && i < req->n_headers; i++)
		free((char *)hdr_src[i]);
	free(hdr_src);
	free(hdr_name);
	free(opts);
	free(src);
	return rc;
}

/* Appends nvJitLink's error log, then its info log; returns the error log's length. */
static size_t nvjitlink_logs(nvJitLinkHandle h, struct jc_res *res)
{
	size_t size = 0, err_len = 0;
	if (nvJitLinkGetErrorLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
		char *log = malloc(size);
		if (log && nvJitLinkGetErrorLog(h, log) == NVJITLINK_SUCCESS) {
			err_len = strnlen(log, size);
			append_log(res, log, err_len);
		}
		free(log);
	}
	if (nvJitLinkGetInfoLogSize(h, &size) == NVJITLINK_SUCCESS && size > 1) {
		char *log = malloc(size);
		if (log && nvJitLinkGetInfoLog(h, log) == NVJITLINK_SUCCESS)
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
static int nvjitlink_link(const struct jc_req *req, struct jc_res *res)
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
		set_message(res, JC_ENOMEM, "worker out of memory");
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
	uint64_t t0 = now_ns();
	nvJitLinkResult r = nvJitLinkCreate(&h, (uint32_t)n_opts, opts);
	if (r == NVJITLINK_SUCCESS && res->data)
		r = nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, res->data, res->size,
				     req->source_name);
	for (size_t i = 0; r == NVJITLINK_SUCCESS && i < req->n_link_inputs; i++) {
		const struct jc_blob *in = &req->link_inputs[i];
		r = nvJitLinkAddData(h, (nvJitLinkInputType)in->type, in->data, in->size, in->name);
		unsigned maj = 0, min = 0;
		/* nvJitLink 13.0 answers OUTDATED_LIBRARY for LTO-IR whose NVVM
		 * container or IR version is newer than its own (tried by raising
		 * those header fields of NVRTC's output; older ones are accepted). */
		if (r == NVJITLINK_ERROR_OUTDATED_LIBRARY && nvJitLinkVersion(&maj, &min) == 0)
			set_message(res, JC_ECOMPILE,
				    "link input %s (%s) holds LTO-IR from a newer CUDA toolkit than this "
				    "nvJitLink %u.%u accepts (%s): rebuild it with CUDA %u.%u, or update "
				    "the toolkit the daemon uses", in->name, jc__input_type_name(in->type),
				    maj, min, nvjitlink_name(r), maj, min);
		else if (r != NVJITLINK_SUCCESS)
			set_message(res, nvjitlink_status(r), "nvJitLink refused link input %s (%s): %s",
				    in->name, jc__input_type_name(in->type), nvjitlink_name(r));
	}
	if (r == NVJITLINK_SUCCESS)
		r = nvJitLinkComplete(h);
	res->compile_ns += now_ns() - t0;
	size_t err_len = h ? nvjitlink_logs(h, res) : 0;
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
		r = ptx ? nvJitLinkGetLinkedPtxSize(h, &size) : nvJitLinkGetLinkedCubinSize(h, &size);
	if (r == NVJITLINK_SUCCESS && !(res->data = malloc(size ? size : 1)))
		set_message(res, JC_ENOMEM, "worker out of memory");
	if (r == NVJITLINK_SUCCESS && res->data)
		r = ptx ? nvJitLinkGetLinkedPtx(h, (char *)res->data)
			: nvJitLinkGetLinkedCubin(h, res->data);
	if (r != NVJITLINK_SUCCESS && res->status == 0)
		set_message(res, internal_explained ? JC_ECOMPILE : nvjitlink_status(r),
			    "nvJitLink link for %s failed: %s (see the log)", req->arch,
			    nvjitlink_name(r));
	if (res->status == JC_ECOMPILE)
		prepend_message(res);
	if (res->status == 0) {
		res->size = size;
		res->output = ptx ? JC_OUTPUT_PTX : JC_OUTPUT_CUBIN;
	}
	if (h)
		nvJitLinkDestroy(&h);
	free(opts);
	return res->status;
}

/*
 * Test-only faults, honoured only when JITCACHE_TEST_FAULTS=1 (see README):
 * die of SIGSEGV, hang until killed, or allocate (and touch) memory until the
 * memory limit stops it, then exit with JC_WORKER_EXIT_NOMEM as a worker
 * whose allocation fails must. Without a limit the allocation fault is
 * refused (it would take the machine's memory): returns 0 to go on with the
 * job, or a JC_E code set in res.
 */
static int test_fault(uint32_t fault, struct jc_res *res)
{
	const char *on = getenv("JITCACHE_TEST_FAULTS");
	if (!on || strcmp(on, "1") != 0)
		return 0;
	switch (fault) {
	case JC_FAULT_CRASH:
		signal(SIGSEGV, SIG_DFL); /* die of it, past any sanitizer's handler */
		raise(SIGSEGV);
		break;
	case JC_FAULT_HANG:
		for (;;)
			pause();
	case JC_FAULT_ALLOC:
		if (!mem_limit) {
			set_message(res, JC_EINVAL, "test fault alloc needs a worker memory limit "
				    "(--worker-memory)");
			return res->status;
		}
		for (size_t mib = 0;; mib += 64) {
			char *p = malloc(64u << 20);
			if (!p) {
				jc_log_err(WORKER, "test fault alloc: allocation failed after %zu MiB "
					   "(limit %llu MiB)", mib, (unsigned long long)(mem_limit >> 20));
				_exit(JC_WORKER_EXIT_NOMEM);
			}
			memset(p, 1, 64u << 20);
		}
	default:
		break;
	}
	return 0;
}

static void run_job(const struct jc_req *req, struct jc_res *res)
{
	if (test_fault(req->test_fault, res) != 0)
		return;
	res->output = req->output;
	if (req->job == JC_JOB_COMPILE)
		nvrtc_compile(req, req->output, res);
	else if (req->job != JC_JOB_COMPILE_LINK || nvrtc_compile(req, JC_OUTPUT_LTOIR, res) == 0)
		nvjitlink_link(req, res);
	if (res->status == JC_ENOMEM && mem_limit && res->message)
		set_message(res, JC_ENOMEM, "%s (worker memory limit %llu MiB: --worker-memory)",
			    res->message, (unsigned long long)(mem_limit >> 20));
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

/* The address space mapped now (VmSize), in bytes; 0 when unknown. */
static uint64_t vm_size(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* RLIMIT_AS = what is mapped now + mem_limit (see worker.h for why). */
static void apply_memory_limit(void)
{
	uint64_t base = vm_size();
	struct rlimit rl = {.rlim_cur = base + mem_limit, .rlim_max = base + mem_limit};
	if (base == 0 || base + mem_limit < base || setrlimit(RLIMIT_AS, &rl) != 0)
		jc_log_warn(WORKER, "cannot set a memory limit of %llu bytes: %s",
			    (unsigned long long)mem_limit, base ? strerror(errno) : "no /proc/self/statm");
}

/* The toolkit tree of the loaded libnvrtc: realpath of <its directory>/..
 * (as toolchain.c finds its include tree); "" when unknown. */
static void toolkit_root(char *out, size_t len)
{
	Dl_info info;
	char real[PATH_MAX];
	out[0] = '\0';
	if (!dladdr((void *)nvrtcVersion, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
		return;
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(real, '/');
		if (!slash || slash == real)
			return;
		*slash = '\0';
	}
	snprintf(out, len, "%s", real);
}

/*
 * The working directory must be an empty directory that only our uid can
 * change (NVRTC looks there for quoted includes and program names: see
 * worker.h). 0, or -1 with a message on stderr.
 */
static int check_cwd(char *cwd, size_t len)
{
	struct stat st;
	const char *why = NULL;
	if (!getcwd(cwd, len) || stat(".", &st) != 0)
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		why = "not a directory owned by this uid";
	else if (st.st_mode & 022)
		why = "writable by group or others";
	DIR *d = why ? NULL : opendir(".");
	for (struct dirent *de; d && !why && (de = readdir(d));)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
			why = "not empty";
	if (d)
		closedir(d);
	if (!why)
		return 0;
	fprintf(stderr, "jitcache-worker: working directory %s: %s\n", cwd, why);
	return -1;
}

/*
 * Before the first job: one tiny compile, so that NVRTC has loaded its
 * builtins library and initialised itself in this process (each job's child
 * inherits that, confined or not), and libcuda loaded where it exists (NVRTC
 * dlopens it during a compile; a loaded one is found without a file access).
 */
static void warm_up(void)
{
	nvrtcProgram prog;
	dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (nvrtcCreateProgram(&prog, "__global__ void jc_warm_up() {}\n", "warm_up.cu", 0, NULL,
			       NULL) != NVRTC_SUCCESS)
		return;
	nvrtcCompileProgram(prog, 0, NULL);
	nvrtcDestroyProgram(&prog);
}

/* Runs one job (the payload of a COMPILE frame) in this process, a child
 * made for it or the confined helper (then confined is 1: it already is),
 * and writes its RESULT frame to fd 0. Returns 0, or 1 when it could not. */
static int run_job_here(const struct jc_buf *in, const char *tk_root, const char *cwd,
			int confined)
{
	struct jc_req req = {0};
	struct jc_res res;
	struct jc_buf out = {0};
	char err[512];
	jc__res_init(&res);
	int rc = jc__decode_req(in->data, in->len, &req);
	if (rc != 0) {
		set_message(&res, rc, "worker could not decode the request");
	} else if (jc__wfs_begin(&req, tk_root, cwd) != 0) {
		set_message(&res, JC_ENOMEM, "worker out of memory");
	} else if (!confined && (rc = jc__wfs_confine(confine_mode, err, sizeof(err))) != 0) {
		set_message(&res, rc, "cannot confine the compile (%s): %s; not compiled",
			    jc__confine_name(confine_mode), err);
		jc__wfs_end(&res);
	} else {
		run_job(&req, &res);
		jc__wfs_end(&res);
	}
	if (res.status != 0) {
		free(res.data);
		res.data = NULL;
		res.size = 0;
	}
	rc = jc__encode_res(&out, &res);
	if (rc == JC_ETOOBIG) {
		jc__res_clear(&res);
		set_message(&res, JC_ETOOBIG, "artifact larger than the frame limit");
		jc__buf_reset(&out);
		rc = jc__encode_res(&out, &res);
	}
	jc__req_clear(&req);
	jc__res_clear(&res);
	rc = rc != 0 || jc__io_write_all(STDIN_FILENO, out.data, out.len) != 0;
	jc__buf_free(&out);
	return rc;
}

/* Dies the way child pid died (after reaping it), so that the daemon's
 * accounting of crashes and memory exhaustion is unchanged; returns only
 * when it exited 0 (0), or -1 when it cannot be waited for. */
static int mirror_exit(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL); /* past any sanitizer's handler */
		raise(WTERMSIG(st));
		_exit(128 + WTERMSIG(st));
	}
	if (WEXITSTATUS(st) != 0)
		_exit(WEXITSTATUS(st));
	return 0;
}

/* fork() for a job process that dies with us (the daemon's timeout kills us). */
static pid_t fork_job_process(void)
{
	pid_t parent = getpid();
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		jc_log_err(WORKER, "fork: %s", strerror(errno));
	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
		_exit(1);
	return pid;
}

/*
 * A job that declares include directories runs in a child of its own:
 * confinement is per process and cannot be undone, and each request
 * declares its own. Returns 0 when the child answered.
 */
static int run_in_child(const struct jc_buf *in, const char *tk_root, const char *cwd)
{
	pid_t pid = fork_job_process();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(run_job_here(in, tk_root, cwd, 0));
	return mirror_exit(pid);
}

/*
 * Jobs that declare no include directory (most: NVRTC then reads nothing
 * but the toolkit) all share one helper process, confined once to the
 * toolkit tree and kept: it stays as warm as an unconfined worker, where a
 * child per job would pay NVRTC's copy-on-write faults on every compile.
 * The parent hands it each frame over a socketpair; the helper answers the
 * daemon on fd 0 itself and then sends one byte back. A helper that dies is
 * mirrored like a child (and the daemon replaces this worker).
 */
static pid_t helper_pid = -1;
static int helper_fd = -1;

static void helper_main(int fd, const char *tk_root, const char *cwd)
{
	static const struct jc_req no_dirs;
	char err[512];
	if (jc__wfs_begin(&no_dirs, tk_root, cwd) != 0)
		_exit(JC_WORKER_EXIT_NOMEM);
	int rc = jc__wfs_confine(confine_mode, err, sizeof(err));
	struct jc_res none;
	jc__res_init(&none);
	jc__wfs_end(&none);
	jc__res_clear(&none);
	struct jc_buf in = {0};
	for (;;) {
		uint16_t type;
		if (jc__io_read_frame(fd, &in, &type, NULL, -1) != 0)
			_exit(0); /* the worker is gone */
		if (rc != 0) { /* answer with the reason, as a child would */
			struct jc_res res;
			struct jc_buf out = {0};
			jc__res_init(&res);
			set_message(&res, rc, "cannot confine the compile (%s): %s; not compiled",
				    jc__confine_name(confine_mode), err);
			int bad = jc__encode_res(&out, &res) != 0 ||
				  jc__io_write_all(STDIN_FILENO, out.data, out.len) != 0;
			jc__res_clear(&res);
			jc__buf_free(&out);
			if (bad)
				_exit(1);
		} else if (run_job_here(&in, tk_root, cwd, 1) != 0) {
			_exit(1);
		}
		char done = 1;
		if (jc__io_write_all(fd, &done, 1) != 0)
			_exit(0);
	}
}

/* Starts the helper (at start-up, so that the first job finds it). 0 or -1. */
static int helper_start(const char *tk_root, const char *cwd)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	pid_t pid = fork_job_process();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		helper_main(sv[1], tk_root, cwd);
	}
	close(sv[1]);
	helper_pid = pid;
	helper_fd = sv[0];
	return 0;
}

static int run_in_helper(const struct jc_buf *in, uint16_t type, const char *tk_root,
			 const char *cwd)
{
	if (helper_pid < 0 && helper_start(tk_root, cwd) != 0)
		return -1;
	uint8_t hdr[JC_FRAME_HDR] = {0};
	for (int i = 0; i < 4; i++)
		hdr[i] = (uint8_t)(in->len >> (8 * i));
	hdr[4] = (uint8_t)type;
	hdr[5] = (uint8_t)(type >> 8);
	char done;
	ssize_t n = -1;
	if (jc__io_write_all(helper_fd, hdr, sizeof(hdr)) == 0 &&
	    jc__io_write_all(helper_fd, in->data, in->len) == 0)
		while ((n = read(helper_fd, &done, 1)) < 0 && errno == EINTR)
			;
	if (n == 1)
		return 0;
	close(helper_fd);
	helper_fd = -1;
	kill(helper_pid, SIGKILL); /* gone, or stuck: either way it dies now */
	mirror_exit(helper_pid);
	helper_pid = -1;
	return -1; /* it exited 0 without answering: give up like a child that could not */
}

/* 1 when the COMPILE payload in declares no include directory (or cannot
 * be decoded: the child that runs it reports that). */
static int without_include_dirs(const struct jc_buf *in)
{
	struct jc_req req = {0};
	int none = jc__decode_req(in->data, in->len, &req) != 0 || req.include_dirs.n == 0;
	jc__req_clear(&req);
	return none;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--memory-limit") == 0 &&
		    parse_size(argv[i + 1], &mem_limit) == 0) {
			i++;
		} else if (i + 1 < argc && strcmp(argv[i], "--confine") == 0 &&
			   (confine_mode = jc__confine_parse(argv[i + 1])) >= 0) {
			i++;
		} else {
			fprintf(stderr, "usage: jitcache-worker [--memory-limit BYTES] [--confine "
				"none|landlock|userns] (started by jitcached): bad argument %s\n", argv[i]);
			return JC_WORKER_EXIT_USAGE;
		}
	}
	/* A worker must not outlive its daemon, which bounds its compile time:
	 * die with it (also if it is already gone). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
		return 1;
	char cwd[PATH_MAX], tk_root[PATH_MAX];
	if (check_cwd(cwd, sizeof(cwd)) != 0)
		return JC_WORKER_EXIT_CWD;
	toolkit_root(tk_root, sizeof(tk_root));
	warm_up();
	if (mem_limit)
		apply_memory_limit();
	signal(SIGPIPE, SIG_IGN);
	helper_start(tk_root, cwd); /* else at the first job that needs it */

	struct jc_buf in = {0};
	for (;;) {
		uint16_t type;
		int rc = jc__io_read_frame(STDIN_FILENO, &in, &type, NULL, -1);
		if (rc == JC_EIO)
			break; /* daemon closed the pipe: exit quietly */
		if (rc != 0 || type != JC_MSG_COMPILE) {
			jc_log_err(WORKER, "bad frame from daemon (%s)", jc_strerror(rc ? rc : JC_EPROTO));
			break;
		}
		rc = without_include_dirs(&in) ? run_in_helper(&in, type, tk_root, cwd)
					       : run_in_child(&in, tk_root, cwd);
		if (rc != 0)
			break;
	}
	jc__buf_free(&in);
	return 0;
}
