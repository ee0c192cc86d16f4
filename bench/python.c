/* SPDX-License-Identifier: MIT */
/*
 * Hits from Python (the jitcache package, bench/python_hit.py) beside the C
 * client's, interleaved in blocks of 50: the Python process times a block
 * when asked over its stdin and answers the durations on its stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define BLOCK 50

/* Reads the child's stderr file into why (for a Python that could not run). */
static void child_failed(const char *errpath, pid_t pid, char *why, size_t whylen)
{
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	char err[512] = "";
	FILE *f = fopen(errpath, "r");
	if (f) {
		size_t n = fread(err, 1, sizeof(err) - 1, f);
		err[n] = '\0';
		fclose(f);
	}
	/* The last line says most (a traceback ends with the exception). */
	char *end = err + strlen(err);
	while (end > err && end[-1] == '\n')
		*--end = '\0';
	char *last = strrchr(err, '\n');
	snprintf(why, whylen, "%s (exit status %d)", last ? last + 1 : err,
		 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

int bench_python_hits(const struct bench_daemon *d, jc_client *c, const jc_request *r,
		      const struct bench_object *o, const char *src_path, const char *name,
		      const char *arch, const char *expr, size_t iters, struct bench_lat *py,
		      struct bench_lat *cl, char *why, size_t whylen)
{
	const char *python = getenv("JC_PYTHON");
	if (!python || !*python)
		python = "python3";
	char errpath[PATH_MAX + 32];
	snprintf(errpath, sizeof(errpath), "%s/python.err", d->core.dir);
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		bench_die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || e < 0 || dup2(e, 2) < 0)
			_exit(127);
		setenv("PYTHONPATH", JC_BENCH_PYTHON_DIR, 1);
		setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
		setenv("JITCACHE_CLIENT_LIB", JC_BENCH_CLIENT_LIB, 0);
		execlp(python, python, JC_BENCH_PYTHON_DIR "/../bench/python_hit.py", d->core.sock,
		       src_path, name, arch, expr, (char *)NULL);
		fprintf(stderr, "cannot run %s: %s\n", python, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	FILE *to = fdopen(in[1], "w"), *from = fdopen(out[0], "r");
	if (!to || !from)
		bench_die("fdopen: %s", strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	if (getline(&line, &cap, from) < 0) {
		fclose(to);
		child_failed(errpath, pid, why, whylen);
		rc = -1;
		goto out;
	}
	if (strcmp(line, "ready hit\n") != 0)
		bench_die("python_hit.py: expected \"ready hit\", got \"%s\"", line);
	uint64_t *tp = malloc(iters * sizeof(*tp)), *tc = malloc(iters * sizeof(*tc));
	if (!tp || !tc)
		bench_die("out of memory");
	for (size_t i = 0; i < 200; i++)
		bench_timed_request(c, r, JC_HIT, o->size);
	for (size_t i = 0; i < iters;) {
		size_t n = iters - i < BLOCK ? iters - i : BLOCK;
		fprintf(to, "%zu\n", n);
		fflush(to);
		if (getline(&line, &cap, from) < 0)
			bench_die("python_hit.py stopped answering (see %s)", errpath);
		char *p = line;
		for (size_t j = 0; j < n; j++) {
			char *end;
			tp[i + j] = strtoull(p, &end, 10);
			if (end == p)
				bench_die("python_hit.py: malformed timings \"%s\"", line);
			p = end;
		}
		for (size_t j = 0; j < n; j++)
			tc[i + j] = bench_timed_request(c, r, JC_HIT, o->size);
		i += n;
	}
	fclose(to);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_die("python_hit.py failed (see %s)", errpath);
	bench_lat_of(tp, iters, py);
	bench_lat_of(tc, iters, cl);
	free(tp);
	free(tc);
out:
	free(line);
	fclose(from);
	return rc;
}
