/* SPDX-License-Identifier: MIT */
#include "ops_util.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "index.h"
#include "req.h"

const char *opst_tiny_src(int n)
{
	static char src[160];
	snprintf(src, sizeof(src), "extern \"C\" __global__ void tiny(int *p) { *p = %d; }\n",
		 100000 + n);
	return src;
}

/* Compiles src as name for arch, expecting jc_compile to return want. */
static jc_cache_status compile_src(const struct jc_test_daemon *d, const char *name,
				   const char *src, const char *arch, int want, char key_out[33])
{
	jc_request *r = jct_request_src(name, src, arch);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != want)
		fprintf(stderr, "compile %s: %s\n", name, jc_client_errmsg(c));
	assert_int_equal(rc, want);
	jc_cache_status st = jc_result_cache_status(res);
	if (key_out)
		snprintf(key_out, 33, "%s", jc_result_key(res));
	jc_result_free(res);
	jc_client_close(c);
	jc_request_free(r);
	return st;
}

jc_cache_status opst_compile_tiny(const struct jc_test_daemon *d, int n, const char *arch,
				  char key_out[33])
{
	char name[32];
	snprintf(name, sizeof(name), "tiny%d.cu", n);
	return compile_src(d, name, opst_tiny_src(n), arch, 0, key_out);
}

jc_cache_status opst_compile_failure(const struct jc_test_daemon *d, char key_out[33])
{
	static const char bad[] = "extern \"C\" __global__ void k() { undefined_thing(); }\n";
	return compile_src(d, "bad.cu", bad, "sm_90", JC_ECOMPILE, key_out);
}

char *opst_ctl(const struct jc_test_daemon *d, int want, char **err, const char *const *args)
{
	char *out = NULL, *e = NULL;
	int rc = jct_ctl(d, &out, &e, args);
	if (rc != want) {
		fprintf(stderr, "jitcachectl");
		for (size_t i = 0; args[i]; i++)
			fprintf(stderr, " %s", args[i]);
		fprintf(stderr, ": exit %d, wanted %d\nstdout: %s\nstderr: %s\n", rc, want, out, e);
		fail();
	}
	if (err)
		*err = e;
	else
		free(e);
	return out;
}

size_t opst_ls_keys(const struct jc_test_daemon *d, char (*keys)[33], size_t max)
{
	const char *args[] = {"ls", "--json", NULL};
	char *out = opst_ctl(d, 0, NULL, args);
	size_t n = 0;
	for (const char *p = out; (p = strstr(p, "\"key\": \"")); p += 8) {
		if (n < max)
			snprintf(keys[n], 33, "%.32s", p + 8);
		n++;
	}
	free(out);
	return n < max ? n : max;
}

int opst_listed(const struct jc_test_daemon *d, const char *key)
{
	char keys[512][33];
	size_t n = opst_ls_keys(d, keys, 512);
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], key) == 0)
			return 1;
	return 0;
}

int64_t opst_json_int(const char *json, const char *name)
{
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\": ", name);
	const char *p = strstr(json, pat);
	if (!p) {
		fprintf(stderr, "no \"%s\" in %s\n", name, json);
		fail();
	}
	return strtoll(p + strlen(pat), NULL, 10);
}

void opst_set_times(const char *cache, const char *key, int64_t created, int64_t last_access)
{
	char path[512], err[256];
	uint8_t k[16];
	struct jc_index *ix = NULL;
	struct jc_entry e = {0};
	snprintf(path, sizeof(path), "%s/index.sqlite", cache);
	assert_int_equal(jc__unhex16(key, k), 0);
	assert_int_equal(jc__index_open(path, 0, &ix, err, sizeof(err)), 0);
	assert_int_equal(jc__index_get(ix, k, &e), 0);
	e.created = created;
	e.last_access = last_access;
	assert_int_equal(jc__index_put(ix, &e), 0);
	jc__entry_clear(&e);
	jc__index_close(ix);
}

int opst_le(int64_t v, int64_t arg)
{
	return v <= arg;
}

int opst_ge(int64_t v, int64_t arg)
{
	return v >= arg;
}

int64_t opst_wait_stat(const struct jc_test_daemon *d, const char *name, int (*want)(int64_t v, int64_t arg),
		       int64_t arg, int timeout_ms)
{
	int64_t v = jct_stat(d, name);
	for (int waited = 0; !want(v, arg) && waited < timeout_ms; waited += 50) {
		usleep(50000);
		v = jct_stat(d, name);
	}
	return v;
}

char *opst_log(const struct jc_test_daemon *d)
{
	size_t n;
	char *log = (char *)jct_read_file(d->log, &n);
	assert_non_null(log);
	return log;
}

int opst_wait_log(const struct jc_test_daemon *d, const char *text, int timeout_ms)
{
	for (int waited = 0;; waited += 20) {
		size_t n;
		char *log = (char *)jct_read_file(d->log, &n);
		int found = log && strstr(log, text);
		free(log);
		if (found || waited >= timeout_ms)
			return found;
		usleep(20000);
	}
}

void opst_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}
