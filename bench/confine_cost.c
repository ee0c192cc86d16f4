/* SPDX-License-Identifier: MIT */
/*
 * jitcache-confine-cost [N [KIND]]: the CPU time of one SAXPY compile (NVRTC, sm_90,
 * a fresh -D each time) in the three ways a compile worker could run it,
 * side by side in one process tree: in the warm process itself (what
 * workers did before confinement), in a child forked for the job and
 * confined there (what a job with include directories costs: worker.c), and
 * in one helper forked and confined once (what a job without include
 * directories costs). CPU time (CLOCK_PROCESS_CPUTIME_ID), not wall time,
 * so that a loaded machine changes the figures less. Prints medians of N
 * compiles (default 15). Uses KIND (landlock, userns, none), else the best
 * confinement this kernel offers (confine.h), with the toolkit tree of the
 * loaded libnvrtc as its root.
 */
#include <dlfcn.h>
#include <limits.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/confine.h"
#include "tests/lib/core.h"

static const char src[] =
    "template <typename T>\n"
    "__global__ void saxpy(T a, const T *__restrict__ x, T *__restrict__ y, unsigned long long n)\n"
    "{\n"
    "	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "	if (i < n)\n"
    "		y[i] = a * x[i] + y[i];\n"
    "}\n";

static char root[PATH_MAX], cwd[PATH_MAX];
static int kind;

static double cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One compile; its CPU milliseconds. */
static double compile(int salt)
{
	nvrtcProgram p;
	char d[32];
	snprintf(d, sizeof(d), "-DSALT=%d", salt);
	const char *opts[] = {d, "--gpu-architecture=sm_90"};
	double t = cpu_ms();
	if (nvrtcCreateProgram(&p, src, "saxpy.cu", 0, NULL, NULL) != NVRTC_SUCCESS ||
	    nvrtcAddNameExpression(p, "&saxpy<float>") != NVRTC_SUCCESS ||
	    nvrtcCompileProgram(p, 2, opts) != NVRTC_SUCCESS) {
		fprintf(stderr, "jitcache-confine-cost: the SAXPY compile failed\n");
		exit(1);
	}
	nvrtcDestroyProgram(&p);
	return cpu_ms() - t;
}

static void confine(void)
{
	char err[256];
	const char *roots[] = {root};
	if (jc__confine_apply(kind, roots, 1, cwd, err, sizeof(err)) != 0) {
		fprintf(stderr, "jitcache-confine-cost: %s\n", err);
		_exit(1);
	}
}

/* Reads one double from fd (a child's figure). */
static double take(int fd)
{
	double v = 0;
	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
		fprintf(stderr, "jitcache-confine-cost: a child died\n");
		exit(1);
	}
	return v;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 15;
	if (n < 1 || n > 1000)
		n = 15;
	Dl_info info;
	char real[PATH_MAX];
	if (!dladdr((void *)nvrtcVersion, &info) || !realpath(info.dli_fname, real))
		return 1;
	*strrchr(real, '/') = '\0';
	*strrchr(real, '/') = '\0';
	snprintf(root, sizeof(root), "%s", real);
	/* The namespace kind mounts over the working directory: an empty one. */
	char tmpl[JTL_ROOT_MAX], why[256];
	if (jtl_tmpdir(tmpl, sizeof(tmpl), NULL, "confine-cost", why, sizeof(why)) != 0 ||
	    chdir(tmpl) != 0) {
		fprintf(stderr, "jitcache-confine-cost: %s\n", why);
		return 1;
	}
	snprintf(cwd, sizeof(cwd), "%s", tmpl);
	int abi;
	kind = jc__confine_detect(&abi, why, sizeof(why));
	if (argc > 2 && (kind = jc__confine_parse(argv[2])) < 0) {
		fprintf(stderr, "usage: jitcache-confine-cost [N [landlock|userns|none]]\n");
		return 2;
	}
	if (argc > 2)
		snprintf(why, sizeof(why), "as asked");
	double *in = calloc((size_t)n, sizeof(double)), *child = calloc((size_t)n, sizeof(double)),
	       *helper = calloc((size_t)n, sizeof(double));
	int p[2];
	if (!in || !child || !helper || pipe(p) != 0)
		return 1;
	compile(0); /* warm, as a worker is before its first job */
	for (int i = 0; i < n; i++)
		in[i] = compile(1000 + i);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			double t = cpu_ms();
			confine();
			compile(2000 + i);
			double v = cpu_ms() - t;
			_exit(write(p[1], &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
		}
		child[i] = take(p[0]);
		waitpid(pid, NULL, 0);
	}
	pid_t pid = fork();
	if (pid == 0) {
		confine();
		for (int i = 0; i < n; i++) {
			double v = compile(3000 + i);
			if (write(p[1], &v, sizeof(v)) != (ssize_t)sizeof(v))
				_exit(1);
		}
		_exit(0);
	}
	for (int i = 0; i < n; i++)
		helper[i] = take(p[0]);
	waitpid(pid, NULL, 0);
	char err[256];
	if (jtl_rmtree(tmpl, err, sizeof(err)) != 0)
		fprintf(stderr, "jitcache-confine-cost: %s\n", err);
	printf("SAXPY compile, CPU ms, median of %d (confinement %s: %s):\n"
	       "  in the warm process (unconfined, as before)  %.1f\n"
	       "  child forked and confined per job            %.1f\n"
	       "  helper confined once (jobs without -I)        %.1f\n",
	       n, jc__confine_name(kind), why, jtl_median(in, (size_t)n),
	       jtl_median(child, (size_t)n), jtl_median(helper, (size_t)n));
	return 0;
}
