/* SPDX-License-Identifier: MIT */
/*
 * jitcache-worker: the compile worker process. jitcached starts a pool of
 * them; each reads COMPILE frames on fd 0 (a socketpair with the daemon),
 * runs NVRTC and/or nvJitLink, and writes one RESULT frame (artifact bytes
 * inline) per request. A crash, hang or memory blow-up here costs the daemon
 * one worker, never its own life: it kills and replaces us.
 *
 * Usage: jitcache-worker [--memory-limit BYTES]   (not for humans; see worker.h)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fatbin.h"
#include "io.h"
#include "jitcache/jitcache.h"
#include "log.h"
#include "nvjob.h"
#include "proto.h"
#include "req.h"
#include "worker.h"

/* --memory-limit: bytes of address space allowed beyond the start-up size (0: none). */
static uint64_t mem_limit;

/* The toolkit, linked in (the client library reaches it through dlopen). */
static const struct jc_nv nv = {
#define DIRECT(f) .f = f,
	JC_NVRTC_FNS(DIRECT) JC_NVJITLINK_FNS(DIRECT) JC_NVJITLINK_UNVERSIONED_FNS(DIRECT)
#undef DIRECT
	.has_nvjitlink = 1,
};

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
			jc__nv_set_message(res, JC_EINVAL, "test fault alloc needs a worker memory limit "
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
	if (req->job == JC_JOB_FATBIN) {
		char msg[512];
		int rc = jc__fatbin_assemble(req, res, msg, sizeof(msg));
		if (rc)
			jc__nv_set_message(res, rc, "%s", msg);
	} else {
		jc__nv_run_job(&nv, req, res);
	}
	if (res->status == JC_ENOMEM && mem_limit && res->message)
		jc__nv_set_message(res, JC_ENOMEM, "%s (worker memory limit %llu MiB: --worker-memory)",
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

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--memory-limit") == 0) {
		if (parse_size(argv[2], &mem_limit) != 0) {
			fprintf(stderr, "jitcache-worker: bad --memory-limit %s\n", argv[2]);
			return JC_WORKER_EXIT_USAGE;
		}
	} else if (argc != 1) {
		fprintf(stderr, "usage: jitcache-worker [--memory-limit BYTES] (started by jitcached)\n");
		return JC_WORKER_EXIT_USAGE;
	}
	/* A worker must not outlive its daemon, which bounds its compile time:
	 * die with it (also if it is already gone). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
		return 1;
	if (mem_limit)
		apply_memory_limit();
	signal(SIGPIPE, SIG_IGN);

	struct jc_buf in = {0}, out = {0};
	for (;;) {
		uint16_t type;
		int rc = jc__io_read_frame(STDIN_FILENO, &in, &type, NULL, -1);
		if (rc == JC_EIO)
			break; /* daemon closed the pipe: exit quietly */
		if (rc != 0 || type != JC_MSG_COMPILE) {
			jc_log_err(WORKER, "bad frame from daemon (%s)", jc_strerror(rc ? rc : JC_EPROTO));
			break;
		}
		struct jc_req req = {0};
		struct jc_res res;
		jc__res_init(&res);
		rc = jc__decode_req(in.data, in.len, &req);
		if (rc != 0)
			jc__nv_set_message(&res, rc, "worker could not decode the request");
		else
			run_job(&req, &res);
		if (res.status != 0) {
			free(res.data);
			res.data = NULL;
			res.size = 0;
		}
		jc__buf_reset(&out);
		rc = jc__encode_res(&out, &res);
		if (rc == JC_ETOOBIG) {
			jc__res_clear(&res);
			jc__nv_set_message(&res, JC_ETOOBIG, "artifact larger than the frame limit");
			jc__buf_reset(&out);
			rc = jc__encode_res(&out, &res);
		}
		jc__req_clear(&req);
		jc__res_clear(&res);
		if (rc != 0 || jc__io_write_all(STDIN_FILENO, out.data, out.len) != 0)
			break;
	}
	jc__buf_free(&in);
	jc__buf_free(&out);
	return 0;
}
