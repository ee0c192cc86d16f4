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
 * Usage: jitcache-worker [--memory-limit BYTES] [--confine MODE] [--tmp DIR] [--idle]   (not for
 * humans; see worker.h) jitcache-worker --identity   (the toolchain summary a start now loads)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nvrtc.h>
#include <poll.h>
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

#include "common/includes.h"
#include "common/log.h"
#include "common/nvjob.h"
#include "common/req.h"
#include "common/util.h"
#include "core/fatbin.h"
#include "core/toolchain.h"
#include "daemon/worker.h"
#include "daemon/worker_fs.h"
#include "daemon/worker_tree.h"
#include "jitcache/jitcache.h"
#include "proto/io.h"
#include "proto/proto.h"

/* --memory-limit: bytes of address space allowed beyond the start-up size (0: none). */
static uint64_t mem_limit;
/* --confine: enum jc_confine, applied in the helper and each job's child. */
static int confine_mode = JC_CONFINE_NONE;
/* The compiler identity of the NVRTC and nvJitLink this process loaded
 * (jc__toolchain_compiler), sent with every result: a toolkit replaced on
 * disk since the daemon started is loaded by a worker started since, and
 * the daemon must not store its bytes under a key of the old one. "" when
 * it cannot be named (the daemon then stores nothing of ours). */
static char compiler_id[512];

static void name_compiler(void)
{
	struct jc_toolchain tc;
	char err[512] = "";
	if (jc__toolchain_probe_compiler(&tc, err, sizeof(err)) != 0 ||
	    jc__toolchain_compiler(&tc, compiler_id, sizeof(compiler_id)) != 0) {
		jc_log_err(WORKER,
			   "cannot name the loaded compiler (%s): no result of this worker "
			   "will be stored",
			   err[0] ? err : "identity too long");
		compiler_id[0] = '\0';
	}
}

/* The toolkit, linked in (the client library reaches it through dlopen). */
static const struct jc_nv nv = {
#define DIRECT_NVRTC(ret, name, params, args, use) JC_NVRTC_IF_##use(.name = name, )
#define DIRECT(f)				   .f = f,
    JC_NVRTC_FUNCTIONS(DIRECT_NVRTC) JC_NVJITLINK_FNS(DIRECT) JC_NVJITLINK_UNVERSIONED_FNS(DIRECT)
#undef DIRECT
#undef DIRECT_NVRTC
	.has_nvjitlink = 1,
};

/*
 * Test-only faults, honoured only when JITCACHE_TEST_FAULTS=1 (docs/contributing.md):
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
			jc__nv_set_message(res, JC_EINVAL,
					   "test fault alloc needs a worker memory limit "
					   "(--worker-memory)");
			return res->status;
		}
		for (size_t mib = 0;; mib += 64) {
			char *p = malloc(64u << 20);
			if (!p) {
				jc_log_err(WORKER,
					   "test fault alloc: allocation failed after %zu MiB "
					   "(limit %llu MiB)",
					   mib, (unsigned long long)(mem_limit >> 20));
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
		jc__nv_set_message(res, JC_ENOMEM,
				   "%s (worker memory limit %llu MiB: --worker-memory)",
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
			    (unsigned long long)mem_limit,
			    base ? strerror(errno) : "no /proc/self/statm");
}

/* The toolkit tree of the loaded libnvrtc: realpath of <its directory>/..
 * (as toolchain.c finds its include tree); "" when unknown. */
static void toolkit_root(char *out, size_t len)
{
	Dl_info info;
	char real[PATH_MAX];
	out[0] = '\0';
	if (!dladdr((void *)nvrtcVersion, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, real))
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
 * NVRTC dlopens its builtins library (libnvrtc-builtins.so.MAJOR.MINOR, by
 * soname) and libcuda during a compile. Loaded here, before any
 * confinement, a confined job finds them mapped (a match by soname) instead
 * of searching directories its confinement does not grant.
 */
static void preload_libraries(void)
{
	int major = 0, minor = 0;
	char name[64];
	if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS) {
		snprintf(name, sizeof(name), "libnvrtc-builtins.so.%d.%d", major, minor);
		if (!dlopen(name, RTLD_NOW | RTLD_LOCAL))
			jc_log_warn(WORKER, "cannot preload %s: %s", name, dlerror());
	}
	dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); /* absent without a driver: fine */
}

/*
 * One tiny compile in this process, done once the worker is idle after its
 * first job (so that no job waits for it, nor competes with it at start-up):
 * NVRTC initialises itself here once, and every child forked afterwards for
 * a job with include directories inherits that.
 */
static void warm_up(void)
{
	nvrtcProgram prog;
	if (nvrtcCreateProgram(&prog, "__global__ void jc_warm_up() {}\n", "warm_up.cu", 0, NULL,
			       NULL) != NVRTC_SUCCESS)
		return;
	nvrtcCompileProgram(prog, 0, NULL);
	nvrtcDestroyProgram(&prog);
}

/*
 * Probes in the working directory that found nothing (NVRTC looks for
 * __nv_name_map there, and for quoted includes of a program name without a
 * directory) are left out of the record: that directory is empty and only
 * our uid may change it (check_cwd), so they find nothing for every
 * request, and no key needs to hold the daemon's own path.
 */
static void drop_cwd_probes(struct jc_res *res, const char *cwd)
{
	size_t cl = strlen(cwd), k = 0;
	for (size_t i = 0; i < res->n_deps; i++) {
		struct jc_dep *d = &res->deps[i];
		if (d->kind == JC_DEP_ABSENT && strncmp(d->path, cwd, cl) == 0 &&
		    d->path[cl] == '/' && !strchr(d->path + cl + 1, '/')) {
			free(d->path);
			continue;
		}
		res->deps[k++] = *d;
	}
	res->n_deps = k;
}

/* Writes a RESULT frame of status rc and message msg to the daemon. 0 or 1. */
static int answer_error(int rc, const char *msg)
{
	struct jc_res res;
	struct jc_buf out = {0};
	jc__res_init(&res);
	jc__nv_set_message(&res, rc, "%s", msg);
	int bad = jc__encode_res(&out, &res) != 0 ||
		  jc__io_write_all(STDIN_FILENO, out.data, out.len) != 0;
	jc__res_clear(&res);
	jc__buf_free(&out);
	return bad;
}

/* Runs one job (the payload of a COMPILE frame) in this process, a child
 * made for it or the confined helper (then confined is 1: it already is),
 * and writes its RESULT frame to fd 0. Returns 0, or 1 when it could not. */
static int run_job_here(const struct jc_buf *in, const char *tk_root, const char *cwd, int confined)
{
	struct jc_req req = {0};
	struct jc_res res;
	struct jc_buf out = {0};
	char err[512];
	jc__res_init(&res);
	int rc = jc__decode_req(in->data, in->len, &req);
	if (rc != 0) {
		jc__nv_set_message(&res, rc, "worker could not decode the request");
	} else if (jc__wfs_begin(&req, tk_root, cwd) != 0) {
		jc__nv_set_message(&res, JC_ENOMEM, "worker out of memory");
	} else if (!confined && (rc = jc__wfs_confine(confine_mode, err, sizeof(err))) != 0) {
		jc__nv_set_message(&res, rc, "cannot confine the compile (%s): %s; not compiled",
				   jc__confine_name(confine_mode), err);
		jc__wfs_end(&res);
	} else {
		run_job(&req, &res);
		jc__wfs_end(&res);
	}
	jc__wtree_name_deps(&res);
	drop_cwd_probes(&res, cwd);
	if (compiler_id[0] && !(res.compiler = strdup(compiler_id)))
		jc__nv_set_message(&res, JC_ENOMEM, "worker out of memory");
	if (res.status != 0) {
		free(res.data);
		res.data = NULL;
		res.size = 0;
	}
	rc = jc__encode_res(&out, &res);
	if (rc == JC_ETOOBIG) {
		jc__res_clear(&res);
		jc__nv_set_message(&res, JC_ETOOBIG, "artifact larger than the frame limit");
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
		if (rc != 0) {	  /* answer with the reason, as a child would */
			char msg[700];
			snprintf(msg, sizeof(msg),
				 "cannot confine the compile (%s): %s; not compiled",
				 jc__confine_name(confine_mode), err);
			if (answer_error(rc, msg) != 0)
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

enum job_kind { JOB_PLAIN, JOB_DIRS, JOB_TREE };

/*
 * What the COMPILE payload in needs: the helper (it declares no include
 * directory, and loads no library; or it does not decode: the helper reports
 * that), a child of its own, or a child over a client-read tree. A fatbin
 * job's nvFatbin is loaded here first, unconfined, so that the child's dlopen
 * of the same path finds it mapped instead of opening a file its confinement
 * may not grant (a library outside the toolkit tree).
 */
static enum job_kind job_kind(const struct jc_buf *in)
{
	struct jc_req req = {0};
	enum job_kind k = JOB_PLAIN;
	if (jc__decode_req(in->data, in->len, &req) == 0) {
		const char *lib = req.job == JC_JOB_FATBIN ? jc__fatbin_library(&req) : NULL;
		if (lib)
			dlopen(lib, RTLD_NOW | RTLD_LOCAL); /* kept: one library per daemon */
		if (req.include_dirs.n != 0 || lib)
			k = req.tree_round ? JOB_TREE : JOB_DIRS;
	}
	jc__req_clear(&req);
	return k;
}

/* A job with a client-read tree: written out, run in a child, removed. */
static int run_tree_job(const struct jc_buf *in, const char *tk_root, const char *cwd)
{
	struct jc_req req = {0};
	struct jc_buf job = {0};
	char err[600], guess[PATH_MAX + 16], tk_include[PATH_MAX];
	/* the toolkit include tree, as toolchain.c finds it (<lib>/../include) */
	snprintf(guess, sizeof(guess), "%s/include", tk_root);
	if (!tk_root[0] || !realpath(guess, tk_include))
		tk_include[0] = '\0';
	int rc = jc__decode_req(in->data, in->len, &req);
	rc = rc ?: jc__wtree_write(&req, tk_include, err, sizeof(err));
	if (rc == 0 && (rc = jc__encode_req(&job, &req)) != 0)
		snprintf(err, sizeof(err), "cannot re-encode the job: %s", jc_strerror(rc));
	jc__req_clear(&req);
	/* run_in_child takes a frame's payload, as read from the daemon */
	struct jc_buf payload = {.data = job.data + JC_FRAME_HDR, .len = job.len - JC_FRAME_HDR};
	int out = rc == 0 ? run_in_child(&payload, tk_root, cwd) : answer_error(rc, err);
	jc__wtree_remove();
	jc__buf_free(&job);
	return out;
}

/*
 * --idle: a re-warm worker (pool.h, idle_workers) runs, with the helper and
 * children it forks, only when the CPU has nothing else to run and does I/O
 * only when no other process does (jc__set_idle_priority). Both are
 * inherited by fork. The daemon raises the worker, its threads and children
 * back to normal priority while a client waits on its compile
 * (jc__pool_promote), which needs RLIMIT_NICE 20: its soft limit is raised
 * to the hard one here, for that.
 */
static int make_idle(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NICE, &rl); /* at worst the daemon cannot raise us */
	}
	return jc__set_idle_priority(0, 1);
}

/* --identity: the toolchain this process loaded (toolchain.h), every field
 * on stdout (jc__toolchain_format): what a daemon started now would run,
 * which the daemon switches to (its SIGHUP). */
static int print_identity(void)
{
	struct jc_toolchain tc;
	char err[512];
	if (jc__toolchain_probe(&tc, err, sizeof(err)) != 0) {
		jc_log_err(WORKER, "%s", err);
		return 1;
	}
	return jc__toolchain_format(&tc, stdout) != 0 || fflush(stdout) != 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (argc == 2 && strcmp(argv[i], "--identity") == 0) {
			return print_identity();
		} else if (strcmp(argv[i], "--idle") == 0) {
			if (make_idle() != 0)
				jc_log_warn(WORKER,
					    "cannot lower this re-warm worker's priority: %s",
					    strerror(errno));
		} else if (i + 1 < argc && strcmp(argv[i], "--memory-limit") == 0 &&
			   parse_size(argv[i + 1], &mem_limit) == 0) {
			i++;
		} else if (i + 1 < argc && strcmp(argv[i], "--confine") == 0 &&
			   (confine_mode = jc__confine_parse(argv[i + 1])) >= 0) {
			i++;
		} else if (i + 1 < argc && strcmp(argv[i], "--tmp") == 0 && argv[i + 1][0] == '/') {
			jc__wtree_tmp = argv[++i];
		} else {
			fprintf(
			    stderr,
			    "usage: jitcache-worker [--memory-limit BYTES] [--confine "
			    "none|landlock|userns] [--tmp DIR] [--idle] | --identity (started by "
			    "jitcached): bad argument %s\n",
			    argv[i]);
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
	preload_libraries();
	name_compiler();
	if (mem_limit)
		apply_memory_limit();
	signal(SIGPIPE, SIG_IGN);
	helper_start(tk_root, cwd); /* else at the first job that needs it */

	struct jc_buf in = {0};
	for (int jobs = 0, warm = 0;; jobs++) {
		uint16_t type;
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		if (jobs && !warm && poll(&pfd, 1, 0) == 0) {
			warm_up(); /* idle after a first job: nobody waits for it */
			warm = 1;
		}
		int rc = jc__io_read_frame(STDIN_FILENO, &in, &type, NULL, -1);
		if (rc == JC_EIO)
			break; /* daemon closed the pipe: exit quietly */
		if (rc != 0 || type != JC_MSG_COMPILE) {
			jc_log_err(WORKER, "bad frame from daemon (%s)",
				   jc_strerror(rc ? rc : JC_EPROTO));
			break;
		}
		switch (job_kind(&in)) {
		case JOB_PLAIN:
			rc = run_in_helper(&in, type, tk_root, cwd);
			break;
		case JOB_DIRS:
			rc = run_in_child(&in, tk_root, cwd);
			break;
		default:
			rc = run_tree_job(&in, tk_root, cwd);
			break;
		}
		if (rc != 0)
			break;
	}
	jc__buf_free(&in);
	return 0;
}
