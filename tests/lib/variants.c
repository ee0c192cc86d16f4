/* SPDX-License-Identifier: MIT */
/* tests/lib, the concurrency and crash suites' part: see variants.h. */
#include "variants.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nvrtc.h>
#include <cmocka.h>

static const char *const archs[] = {"sm_90", "sm_80", "compute_90"};

void jct_variant(enum jct_kind kind, int n, struct jct_variant *v)
{
	char buf[1024];
	memset(v, 0, sizeof(*v));
	if (kind == JCT_OK && n >= 1000) {
		v->app_abi = "twin";
		n -= 1000;
	}
	snprintf(v->name, sizeof(v->name), "v%d_%d.cu", (int)kind, n);
	v->arch = archs[kind == JCT_OK ? n % 3 : 0];
	v->output = strncmp(v->arch, "compute_", 8) == 0 ? JC_PTX : JC_CUBIN;
	v->expr = "&scale<float>";
	switch (kind) {
	case JCT_OK:
		snprintf(
		    buf, sizeof(buf),
		    "template <typename T> __global__ void scale(T *p, T a)\n"
		    "{ p[threadIdx.x] = p[threadIdx.x] * a + (T)%d; }\n"
		    "extern \"C\" __global__ void k%d(float *p) { p[threadIdx.x] += %d.5f; }\n",
		    n, n, n);
		break;
	case JCT_FAIL:
		snprintf(buf, sizeof(buf),
			 "template <typename T> __global__ void scale(T *p, T a) { p[0] = a; }\n"
			 "extern \"C\" __global__ void bad%d() { undefined_%d(); }\n",
			 n, n);
		break;
	case JCT_SLOW:
		/* Fully unrolled: ptxas takes about a second (superlinear in the count). */
		snprintf(
		    buf, sizeof(buf),
		    "template <typename T> __global__ void scale(T *p, T a) { p[0] = a * (T)%d; }\n"
		    "extern \"C\" __global__ void slow(float *p, int m)\n"
		    "{\n"
		    "	float x = p[threadIdx.x], y = p[threadIdx.x + 1];\n"
		    "#pragma unroll\n"
		    "	for (int i = 0; i < 600; i++) {\n"
		    "		x = x * y + __sinf(x + i);\n"
		    "		if (x > m) y = y * 0.5f + i;\n"
		    "	}\n"
		    "	p[threadIdx.x] = x + y;\n"
		    "}\n",
		    n);
		break;
	}
	v->src = strdup(buf);
	assert_non_null(v->src);
}

void jct_variant_free(struct jct_variant *v)
{
	free(v->src);
	v->src = NULL;
}

jc_request *jct_variant_request(const struct jct_variant *v)
{
	jc_request *r = jct_request_src(v->name, v->src, v->arch);
	assert_int_equal(jc_request_set_output(r, v->output), 0);
	assert_int_equal(jc_request_add_name_expression(r, v->expr), 0);
	if (v->app_abi)
		assert_int_equal(jc_request_set_app_abi(r, v->app_abi), 0);
	return r;
}

void jct_ref_compile(const struct jct_variant *v, struct jct_ref *ref)
{
	nvrtcProgram prog;
	char arch[64];
	size_t n = 0;
	memset(ref, 0, sizeof(*ref));
	assert_int_equal(nvrtcCreateProgram(&prog, v->src, v->name, 0, NULL, NULL), NVRTC_SUCCESS);
	assert_int_equal(nvrtcAddNameExpression(prog, v->expr), NVRTC_SUCCESS);
	snprintf(arch, sizeof(arch), "--gpu-architecture=%s", v->arch);
	const char *opts[] = {arch};
	nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
	assert_true(r == NVRTC_SUCCESS || r == NVRTC_ERROR_COMPILATION);
	assert_int_equal(nvrtcGetProgramLogSize(prog, &n), NVRTC_SUCCESS);
	ref->log = calloc(1, n + 1);
	assert_non_null(ref->log);
	if (n > 1)
		assert_int_equal(nvrtcGetProgramLog(prog, ref->log), NVRTC_SUCCESS);
	if (r != NVRTC_SUCCESS) {
		ref->status = JC_ECOMPILE;
		ref->lowered = strdup("");
		nvrtcDestroyProgram(&prog);
		return;
	}
	const char *lowered;
	assert_int_equal(nvrtcGetLoweredName(prog, v->expr, &lowered), NVRTC_SUCCESS);
	ref->lowered = strdup(lowered);
	if (v->output == JC_PTX) {
		assert_int_equal(nvrtcGetPTXSize(prog, &ref->size), NVRTC_SUCCESS);
		ref->data = malloc(ref->size);
		assert_non_null(ref->data);
		assert_int_equal(nvrtcGetPTX(prog, (char *)ref->data), NVRTC_SUCCESS);
	} else {
		assert_int_equal(nvrtcGetCUBINSize(prog, &ref->size), NVRTC_SUCCESS);
		ref->data = malloc(ref->size);
		assert_non_null(ref->data);
		assert_int_equal(nvrtcGetCUBIN(prog, (char *)ref->data), NVRTC_SUCCESS);
	}
	nvrtcDestroyProgram(&prog);
}

void jct_ref_free(struct jct_ref *ref)
{
	free(ref->data);
	free(ref->log);
	free(ref->lowered);
	memset(ref, 0, sizeof(*ref));
}

static void put_file(const char *dir, int n, const char *ext, const void *data, size_t size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%d.%s", dir, n, ext);
	jct_write_file(path, data, size);
}

void jct_ref_save(const char *dir, int n, const struct jct_ref *ref)
{
	put_file(dir, n, "bin", ref->status ? "" : (const char *)ref->data,
		 ref->status ? 0 : ref->size);
	put_file(dir, n, "log", ref->log, strlen(ref->log));
	put_file(dir, n, "name", ref->lowered, strlen(ref->lowered));
}

static char *get_file(const char *dir, int n, const char *ext, size_t *size)
{
	char path[512];
	size_t len;
	snprintf(path, sizeof(path), "%s/%d.%s", dir, n, ext);
	uint8_t *p = jtl_read_file(path, size ? size : &len);
	assert_non_null(p);
	return (char *)p;
}

void jct_ref_load(const char *dir, int n, struct jct_ref *ref)
{
	memset(ref, 0, sizeof(*ref));
	ref->data = (uint8_t *)get_file(dir, n, "bin", &ref->size);
	ref->log = get_file(dir, n, "log", NULL);
	ref->lowered = get_file(dir, n, "name", NULL);
	ref->status = *ref->lowered ? 0 : JC_ECOMPILE;
}

int jct_ref_check(const struct jct_ref *ref, const struct jct_variant *v, int rc,
		  const jc_result *res, const char *what, uint64_t *wrong_bytes)
{
	if (rc != ref->status || !res) {
		fprintf(stderr, "%s: %s: jc_compile gave %d (%s), NVRTC %d\n", what, v->name, rc,
			jc_strerror(rc), ref->status);
		return 1;
	}
	if (ref->status) {
		if (strcmp(jc_result_log(res), ref->log) != 0) {
			fprintf(stderr, "%s: %s: log differs from NVRTC's:\n%s\n---\n%s\n", what,
				v->name, jc_result_log(res), ref->log);
			return 1;
		}
		return 0;
	}
	size_t n;
	const uint8_t *data = jc_result_data(res, &n);
	uint64_t wrong = n > ref->size ? n - ref->size : ref->size - n;
	for (size_t i = 0; i < n && i < ref->size; i++)
		wrong += data[i] != ref->data[i];
	*wrong_bytes += wrong;
	const char *lowered = jc_result_lowered_name(res, v->expr);
	int bad_name = !lowered || strcmp(lowered, ref->lowered) != 0;
	if (wrong || bad_name)
		fprintf(stderr,
			"%s: %s: %llu wrong bytes (%zu served, %zu expected), lowered %s vs %s\n",
			what, v->name, (unsigned long long)wrong, n, ref->size,
			lowered ? lowered : "(none)", ref->lowered);
	return wrong || bad_name;
}

void jct_pool_parse(const char *spec, struct jct_pool *p)
{
	memset(p, 0, sizeof(*p));
	for (const char *s = spec; *s && p->n < JCT_POOL_MAX; p->n++) {
		const char *colon = strchr(s, ':'), *comma = strchr(s, ',');
		assert_non_null(colon);
		jct_variant((enum jct_kind)atoi(s), atoi(colon + 1), &p->v[p->n]);
		s = comma ? comma + 1 : s + strlen(s);
	}
}

void jct_pool_make_refs(struct jct_pool *p, const char *dir)
{
	for (int i = 0; i < p->n; i++) {
		jct_ref_compile(&p->v[i], &p->ref[i]);
		jct_ref_save(dir, i, &p->ref[i]);
	}
}

void jct_pool_load_refs(struct jct_pool *p, const char *dir)
{
	for (int i = 0; i < p->n; i++)
		jct_ref_load(dir, i, &p->ref[i]);
}

void jct_pool_free(struct jct_pool *p)
{
	for (int i = 0; i < p->n; i++) {
		jct_variant_free(&p->v[i]);
		jct_ref_free(&p->ref[i]);
	}
	p->n = 0;
}

int jct_pool_fetch(const struct jct_pool *p, int i, jc_client *c, const char *what, int *rc,
		   int *status, uint64_t *wrong_bytes)
{
	jc_request *r = jct_variant_request(&p->v[i]);
	jc_result *res = NULL;
	*rc = jc_compile(c, r, &res);
	if (*rc != 0 && *rc != JC_ECOMPILE)
		fprintf(stderr, "%s: %s: %s\n", what, p->v[i].name, jc_client_errmsg(c));
	int bad = jct_ref_check(&p->ref[i], &p->v[i], *rc, res, what, wrong_bytes);
	*status = res ? (int)jc_result_cache_status(res) : 0;
	jc_result_free(res);
	jc_request_free(r);
	return bad;
}

int jct_pool_fetch_from(const struct jct_pool *p, int i, const struct jtl_daemon *d, char *key)
{
	jc_client *c = jct_connect(d);
	jc_request *r = jct_variant_request(&p->v[i]);
	jc_result *res = NULL;
	uint64_t wrong = 0;
	int rc = jc_compile(c, r, &res);
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", p->v[i].name, jc_client_errmsg(c));
	assert_int_equal(jct_ref_check(&p->ref[i], &p->v[i], rc, res, "fetch", &wrong), 0);
	assert_int_equal(wrong, 0);
	int status = (int)jc_result_cache_status(res);
	if (key)
		snprintf(key, 33, "%s", jc_result_key(res));
	jc_result_free(res);
	jc_request_free(r);
	jc_client_close(c);
	return status;
}

void jct_fx_new(void **state, const char *spec)
{
	struct jct_fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	jct_daemon_init(&f->d);
	snprintf(f->refdir, sizeof(f->refdir), "%s/ref", f->d.dir);
	assert_int_equal(mkdir(f->refdir, 0700), 0);
	if (spec) {
		jct_pool_parse(spec, &f->pool);
		jct_pool_make_refs(&f->pool, f->refdir);
	}
	*state = f;
}

int jct_fx_free(void **state)
{
	struct jct_fx *f = *state;
	jct_daemon_cleanup(&f->d);
	jct_pool_free(&f->pool);
	free(f);
	return 0;
}

pid_t jct_spawn_helper(const char *name, const char *const *args, int out_fd)
{
	const char *argv[32] = {"/proc/self/exe", "--helper", name};
	size_t n = 3;
	for (size_t i = 0; args && args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(len > 0);
	self[len] = '\0';
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (out_fd >= 0)
			dup2(out_fd, 1);
		execv(self, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int jct_barrier(int *release)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[1], F_SETFD, FD_CLOEXEC), 0);
	*release = p[1];
	return p[0];
}

void jct_barrier_wait(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

static size_t count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	size_t n = 0;
	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

void jct_scan_store(const char *cache, struct jct_store_scan *out)
{
	char path[1024], sub[1400], file[1800], hex[33];
	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/tmp", cache);
	out->tmp_files = count_entries(path);
	snprintf(path, sizeof(path), "%s/quarantine", cache);
	out->quarantined = count_entries(path);
	snprintf(path, sizeof(path), "%s/objects", cache);
	DIR *top = opendir(path);
	assert_non_null(top);
	struct dirent *de, *fe;
	while ((de = readdir(top))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		DIR *d = opendir(sub);
		if (!d) {
			out->bad_objects++; /* not a directory */
			continue;
		}
		while ((fe = readdir(d))) {
			struct stat st;
			size_t size;
			if (fe->d_name[0] == '.')
				continue;
			snprintf(file, sizeof(file), "%s/%s", sub, fe->d_name);
			out->objects++;
			if (lstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
				fprintf(stderr, "%s: not a regular file\n", file);
				out->bad_objects++;
				continue;
			}
			uint8_t *data = jtl_read_file(file, &size);
			assert_non_null(data);
			jct_hash_hex(data, size, hex);
			free(data);
			if (strcmp(hex, fe->d_name) != 0 || strncmp(hex, de->d_name, 2) != 0) {
				fprintf(stderr, "%s: content hashes to %s\n", file, hex);
				out->bad_objects++;
			}
		}
		closedir(d);
	}
	closedir(top);
}

/* --- client load helpers --------------------------------------------------- */

int jct_helper_client(char **argv)
{
	const char *sock = argv[0], *refdir = argv[1];
	int barrier = atoi(argv[2]), ready = atoi(argv[3]), nreq = atoi(argv[5]);
	unsigned seed = (unsigned)strtoul(argv[4], NULL, 10);
	struct jct_pool p;
	jct_pool_parse(argv[6], &p);
	jct_pool_load_refs(&p, refdir);
	/* Connect first: the barrier then releases 64 ready requests at once. */
	jc_client *c = NULL;
	int rc = jc_client_connect(sock, &c);
	if (write(ready, "r", 1) != 1)
		rc = JC_EIO;
	close(ready);
	jct_barrier_wait(barrier);
	uint64_t wrong = 0, errors = 0, by_status[JC_REMOTE_HIT + 1] = {0};
	int done = 0;
	for (; rc == 0 && done < nreq; done++) {
		int i = (int)(rand_r(&seed) % (unsigned)p.n), got, status;
		errors += (uint64_t)jct_pool_fetch(&p, i, c, "client", &got, &status, &wrong);
		by_status[status >= 0 && status <= JC_REMOTE_HIT ? status : 0]++;
	}
	if (rc != 0)
		fprintf(stderr, "client: %s\n", jc_client_errmsg(NULL));
	errors += (uint64_t)(nreq - done);
	printf(
	    "%d %llu %llu %llu %llu %llu %llu\n", done, (unsigned long long)errors,
	    (unsigned long long)wrong,
	    (unsigned long long)(by_status[JC_MISS] + by_status[JC_REMOTE_HIT]), /* local misses */
	    (unsigned long long)by_status[JC_HIT], (unsigned long long)by_status[JC_JOINED],
	    (unsigned long long)by_status[JC_NEGATIVE_HIT]);
	jc_client_close(c);
	jct_pool_free(&p);
	return errors || wrong ? 1 : 0;
}

void jct_clients_start(const struct jtl_daemon *d, const char *refdir, const char *spec, int n,
		       int nreq, unsigned seed, struct jct_clients *cl)
{
	char bfd[16], rfd[16], sseed[32], sreq[16];
	int release, out[2], ready[2];
	int barrier = jct_barrier(&release);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(ready), 0);
	snprintf(bfd, sizeof(bfd), "%d", barrier);
	snprintf(rfd, sizeof(rfd), "%d", ready[1]);
	snprintf(sreq, sizeof(sreq), "%d", nreq);
	cl->n = n;
	for (int i = 0; i < n; i++) {
		snprintf(sseed, sizeof(sseed), "%u", seed + (unsigned)i * 7919u);
		const char *args[] = {d->sock, refdir, bfd, rfd, sseed, sreq, spec, NULL};
		cl->pids[i] = jct_spawn_helper("client", args, out[1]);
	}
	close(out[1]);
	close(ready[1]);
	close(barrier);
	/* Every helper has connected (or died: EOF), then all go at once. */
	char buf[JCT_CLIENTS_MAX];
	ssize_t got;
	for (int k = 0; k < n; k += (int)got)
		if ((got = read(ready[0], buf, sizeof(buf))) <= 0)
			break;
	close(ready[0]);
	close(release);
	cl->out = out[0];
}

int jct_clients_running(const struct jct_clients *cl)
{
	for (int i = 0; i < cl->n; i++) {
		siginfo_t si = {0};
		waitid(P_PID, (id_t)cl->pids[i], &si, WEXITED | WNOHANG | WNOWAIT);
		if (si.si_pid == 0)
			return 1;
	}
	return 0;
}

void jct_clients_finish(struct jct_clients *cl, struct jct_tally *t)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < cl->n; i++)
		t->failed_exits += jtl_wait(cl->pids[i]) != 0;
	FILE *f = fdopen(cl->out, "r");
	unsigned long long v[7];
	while (fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		      &v[5], &v[6]) == 7) {
		t->lines++;
		t->requests += v[0];
		t->errors += v[1];
		t->wrong += v[2];
		t->misses += v[3];
		t->hits += v[4];
		t->joins += v[5];
		t->negative_hits += v[6];
	}
	fclose(f);
}
