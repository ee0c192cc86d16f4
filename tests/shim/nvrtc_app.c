/* SPDX-License-Identifier: MIT */
/*
 * An ordinary NVRTC application (linked with -lnvrtc, no jitcache code):
 * compiles N programs that differ by a macro, each with two name
 * expressions, from N threads at once (default 1), and prints per program
 * the compile result, PTX and cubin sizes and hashes, the lowered names and
 * the log, in program order. test_shim.sh compares its output with and
 * without jitcache-run.
 *
 * Usage: nvrtc_app [--threads N] [--shared] [--broken] [--include FILE] ARCH [NVRTC_OPTION...]
 *   --shared        one program, compiled first, then queried by the N threads at once
 *   --broken        the programs have a compile error (the log is printed)
 *   --include FILE  the programs #include "FILE" and add its macro EXTRA
 *   --maps          at the end, list the NVRTC files mapped (stderr)
 *   --name NAME     the programs' name (default app.cu)
 *   --warn          the programs have an unused variable (a warning in the log)
 *   --source FILE   the programs are FILE's text (no name expressions)
 */
#include <nvrtc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
	int index;
	char out[4096];
};

static const char *arch_opt;
static const char *const *extra;
static int n_extra, broken, share, maps;
static const char *include, *prog_name = "app.cu";
static char *source; /* --source FILE's text, or NULL */
static int warn;

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

/* The outputs, lowered names and log of compiled program p, appended to j->out at w. */
static void query(struct job *j, nvrtcProgram p, int w)
{
	size_t len = 0;
	char *buf;
	nvrtcGetPTXSize(p, &len);
	buf = malloc(len);
	nvrtcGetPTX(p, buf);
	w += snprintf(j->out + w, sizeof(j->out) - w, " ptx=%zu/%016llx", len,
		      (unsigned long long)fnv(buf, len));
	free(buf);
	nvrtcGetCUBINSize(p, &len);
	buf = malloc(len + 1);
	nvrtcGetCUBIN(p, buf);
	w += snprintf(j->out + w, sizeof(j->out) - w, " cubin=%zu/%016llx", len,
		      (unsigned long long)fnv(buf, len));
	free(buf);
	const char *exprs[] = {"&saxpy<float>", "&saxpy<double>"};
	for (int i = 0; i < 2; i++) {
		const char *name = NULL;
		nvrtcResult r = nvrtcGetLoweredName(p, exprs[i], &name);
		w += snprintf(j->out + w, sizeof(j->out) - w, " %s=%s(rc=%d)", exprs[i],
			      r == NVRTC_SUCCESS ? name : "-", r);
	}
	nvrtcGetProgramLogSize(p, &len);
	buf = malloc(len);
	nvrtcGetProgramLog(p, buf);
	snprintf(j->out + w, sizeof(j->out) - w, " log=%zu\n%s\n", len, buf);
	free(buf);
}

/* Creates and compiles program j->index into *p; the first words of j->out. */
static int compile_job(struct job *j, nvrtcProgram *p)
{
	char src[1024];
	char inc[600] = "";
	if (include)
		snprintf(inc, sizeof(inc), "#include \"%s\"\n", include);
	snprintf(src, sizeof(src),
		 "%s"
		 "template <typename T> __global__ void saxpy(T a, const T *x, T *y, int n)\n"
		 "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + "
		 "y[i] + %d%s; }\n"
		 "%s\n",
		 inc, j->index, include ? " + EXTRA" : "",
		 broken ? "int broken = no_such_name;"
		 : warn ? "__global__ void unused_var(int *p) { int u = 1; *p = 0; }"
			: "");
	nvrtcResult r = nvrtcCreateProgram(p, source ? source : src, prog_name, 0, NULL, NULL);
	if (r != NVRTC_SUCCESS)
		return snprintf(j->out, sizeof(j->out), "program %d create rc=%d\n", j->index, r),
		       -1;
	if (!source) {
		nvrtcAddNameExpression(*p, "&saxpy<float>");
		nvrtcAddNameExpression(*p, "&saxpy<double>");
	}
	const char *opts[16] = {arch_opt};
	for (int i = 0; i < n_extra && i < 15; i++)
		opts[1 + i] = extra[i];
	r = nvrtcCompileProgram(*p, 1 + n_extra, opts);
	return snprintf(j->out, sizeof(j->out), "program %d compile rc=%d", j->index, r);
}

static void *run(void *arg)
{
	struct job *j = arg;
	nvrtcProgram p;
	int w = compile_job(j, &p);
	if (w < 0)
		return NULL;
	query(j, p, w);
	nvrtcDestroyProgram(&p);
	return NULL;
}

/* --shared: every thread queries the one program compiled before. */
static nvrtcProgram shared;

static void *run_shared(void *arg)
{
	struct job *j = arg;
	query(j, shared, snprintf(j->out, sizeof(j->out), "shared program"));
	return NULL;
}

/* FILE's bytes, NUL-terminated (malloc'd), or NULL (said on stderr). */
static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long n = -1;
	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (text = calloc((size_t)n + 1, 1)) && fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		text = NULL;
	}
	if (f)
		fclose(f);
	if (!text)
		fprintf(stderr, "nvrtc_app: cannot read %s\n", path);
	return text;
}

int main(int argc, char **argv)
{
	int threads = 1, i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--broken"))
			broken = 1;
		else if (!strcmp(argv[i], "--shared"))
			share = 1;
		else if (!strcmp(argv[i], "--maps"))
			maps = 1;
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			prog_name = argv[++i];
		else if (!strcmp(argv[i], "--warn"))
			warn = 1;
		else if (!strcmp(argv[i], "--include") && i + 1 < argc)
			include = argv[++i];
		else if (!strcmp(argv[i], "--source") && i + 1 < argc) {
			if (!(source = read_file(argv[++i])))
				return 2;
		} else {
			break;
		}
	}
	if (i >= argc || threads < 1 || threads > 256) {
		fprintf(
		    stderr,
		    "usage: nvrtc_app [--threads N] [--shared] [--broken] [--include FILE] ARCH "
		    "[NVRTC_OPTION...]\n");
		return 2;
	}
	static char arch[64];
	snprintf(arch, sizeof(arch), "-arch=%s", argv[i]);
	arch_opt = arch;
	extra = (const char *const *)argv + i + 1;
	n_extra = argc - i - 1;
	struct job *jobs = calloc((size_t)threads, sizeof(*jobs));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	struct job first = {0};
	if (share) {
		if (compile_job(&first, &shared) < 0)
			return 1;
		puts(first.out);
	}
	for (int k = 0; k < threads; k++) {
		jobs[k].index = k;
		if (pthread_create(&t[k], NULL, share ? run_shared : run, &jobs[k]) != 0)
			return 1;
	}
	for (int k = 0; k < threads; k++) {
		pthread_join(t[k], NULL);
		fputs(jobs[k].out, stdout);
	}
	if (share)
		nvrtcDestroyProgram(&shared);
	FILE *m = maps ? fopen("/proc/self/maps", "r") : NULL;
	char line[4096];
	while (m && fgets(line, sizeof(line), m))
		if (strstr(line, "nvrtc"))
			fputs(strchr(line, '/') ? strchr(line, '/') : line, stderr);
	if (m)
		fclose(m);
	free(jobs);
	free(t);
	free(source);
	return 0;
}
