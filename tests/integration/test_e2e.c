/* SPDX-License-Identifier: MIT */
/*
 * End to end against a real jitcached with real NVRTC compiles: miss then
 * hit with identical bytes, hits across restarts, CUDA ELF for the requested
 * architecture, lowered names equal to NVRTC's own, negative entries and
 * their TTL, purge, and garbage on the socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nvrtc.h>
#include <cmocka.h>

#include "client/client_internal.h"
#include "tests/lib/test.h"

static const char *const saxpy_exprs[] = {"&saxpy<float>", "&saxpy<double>", NULL};
static const char bad_src[] = "extern \"C\" __global__ void k() { undefined_thing(); }\n";

static int setup(void **state)
{
	struct jtl_daemon *d = calloc(1, sizeof(*d));
	jct_daemon_init(d);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	jct_daemon_cleanup(*state);
	free(*state);
	return 0;
}

static void test_miss_then_hit_identical(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *a = jct_compile(d, r, 0), *b = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(a), JC_MISS);
	assert_int_equal(jc_result_cache_status(b), JC_HIT);
	size_t na, nb;
	const uint8_t *da = jc_result_data(a, &na), *db = jc_result_data(b, &nb);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, na);
	assert_int_equal(jct_cubin_sm(da, na), 90);
	assert_string_equal(jc_result_key(a), jc_result_key(b));
	assert_true(jc_result_time_ns(a, JC_TIME_COMPILE) > 0);
	assert_int_equal(jct_stat(d, "hits"), 1);
	assert_int_equal(jct_stat(d, "misses"), 1);
	assert_int_equal(jct_stat(d, "compiles"), 1);
	assert_int_equal(jct_stat(d, "entries"), 1);

	/* After a restart: the same key, a hit, the same bytes. */
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, NULL);
	jc_result *c = jct_compile(d, r, 0);
	size_t nc;
	const uint8_t *dc = jc_result_data(c, &nc);
	assert_int_equal(jc_result_cache_status(c), JC_HIT);
	assert_string_equal(jc_result_key(a), jc_result_key(c));
	assert_int_equal(nc, na);
	assert_memory_equal(dc, da, na);
	/* Counters persist across the restart. */
	assert_int_equal(jct_stat(d, "hits"), 2);
	assert_int_equal(jct_stat(d, "compiles"), 1);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_request_free(r);
}

static void test_lowered_names_match_nvrtc(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *res = jct_compile(d, r, 0);

	/* NVRTC itself, in this process, on the same source. */
	size_t size;
	char *src = (char *)jtl_read_file(jct_example("saxpy.cu"), &size);
	nvrtcProgram prog;
	assert_int_equal(nvrtcCreateProgram(&prog, src, "saxpy.cu", 0, NULL, NULL), NVRTC_SUCCESS);
	for (int i = 0; saxpy_exprs[i]; i++)
		assert_int_equal(nvrtcAddNameExpression(prog, saxpy_exprs[i]), NVRTC_SUCCESS);
	const char *opts[] = {"--gpu-architecture=sm_90"};
	assert_int_equal(nvrtcCompileProgram(prog, 1, opts), NVRTC_SUCCESS);
	for (int i = 0; saxpy_exprs[i]; i++) {
		const char *lowered;
		assert_int_equal(nvrtcGetLoweredName(prog, saxpy_exprs[i], &lowered),
				 NVRTC_SUCCESS);
		assert_non_null(jc_result_lowered_name(res, saxpy_exprs[i]));
		assert_string_equal(jc_result_lowered_name(res, saxpy_exprs[i]), lowered);
	}
	nvrtcDestroyProgram(&prog);
	free(src);

	/* jitcachectl prints EXPR<TAB>LOWERED lines; a hit gives the same ones.
	 * (Its request has the source's directory as first -I: another key.) */
	char want[512], cubin[300];
	snprintf(want, sizeof(want), "&saxpy<float>\t%s\n&saxpy<double>\t%s\n",
		 jc_result_lowered_name(res, "&saxpy<float>"),
		 jc_result_lowered_name(res, "&saxpy<double>"));
	snprintf(cubin, sizeof(cubin), "%s/saxpy.cubin", d->dir);
	for (int i = 0; i < 2; i++) {
		char *out = NULL, *err = NULL;
		const char *args[] = {"compile",     jct_example("saxpy.cu"),
				      "--arch",	     "sm_90",
				      "--name-expr", "&saxpy<float>",
				      "--name-expr", "&saxpy<double>",
				      "-o",	     cubin,
				      NULL};
		assert_int_equal(jct_ctl(d, &out, &err, args), 0);
		assert_true(strncmp(err, i ? "hit" : "miss", i ? 3 : 4) == 0);
		assert_string_equal(out, want);
		free(out);
		free(err);
	}
	jc_result_free(res);
	jc_request_free(r);
}

static void test_arch_is_separate_entry(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r90 = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_request *r80 = jct_request("saxpy.cu", "sm_80", saxpy_exprs);
	jc_result *a = jct_compile(d, r90, 0), *b = jct_compile(d, r80, 0);
	assert_int_equal(jc_result_cache_status(b), JC_MISS);
	assert_string_not_equal(jc_result_key(a), jc_result_key(b));
	size_t n;
	const uint8_t *data = jc_result_data(b, &n);
	assert_int_equal(jct_cubin_sm(data, n), 80);
	assert_int_equal(jct_stat(d, "entries"), 2);
	/* PTX for compute_90 is another entry again, and is PTX text. */
	jc_request *ptx = jct_request("saxpy.cu", "compute_90", saxpy_exprs);
	assert_int_equal(jc_request_set_output(ptx, JC_PTX), 0);
	jc_result *c = jct_compile(d, ptx, 0);
	data = jc_result_data(c, &n);
	assert_non_null(strstr((const char *)data, ".target sm_90"));
	assert_int_equal(jct_stat(d, "entries"), 3);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_request_free(r90);
	jc_request_free(r80);
	jc_request_free(ptx);
}

static void test_negative_entry_and_ttl(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--negative-ttl", "2", NULL};
	jct_daemon_start(d, flags);
	jc_request *r = jct_request_src("bad.cu", bad_src, "sm_90");
	jc_result *a = jct_compile(d, r, JC_ECOMPILE), *b = jct_compile(d, r, JC_ECOMPILE);
	assert_int_equal(jc_result_cache_status(a), JC_MISS);
	assert_int_equal(jc_result_cache_status(b), JC_NEGATIVE_HIT);
	assert_non_null(strstr(jc_result_log(a), "undefined_thing"));
	assert_string_equal(jc_result_log(a), jc_result_log(b)); /* byte-identical log */
	assert_null(jc_result_data(a, NULL));
	assert_int_equal(jct_stat(d, "compiles"), 1);
	assert_int_equal(jct_stat(d, "negative_hits"), 1);
	assert_int_equal(jct_stat(d, "negative_entries"), 1);
	/* jitcachectl: the word, the log, exit 1. */
	char path[400], *err = NULL;
	snprintf(path, sizeof(path), "%s/bad.cu", d->dir);
	FILE *f = fopen(path, "w");
	fputs(bad_src, f);
	fclose(f);
	const char *args[] = {"compile", path, "--arch", "sm_90", NULL};
	assert_int_equal(jct_ctl(d, NULL, &err, args), 1); /* its own key (-I of bad.cu's dir) */
	assert_true(strncmp(err, "miss", 4) == 0);
	free(err);
	assert_int_equal(jct_ctl(d, NULL, &err, args), 1);
	assert_true(strncmp(err, "negative-hit", 12) == 0);
	assert_non_null(strstr(err, "undefined_thing"));
	free(err);
	/* After the TTL it compiles again. */
	sleep(3);
	jc_result *c = jct_compile(d, r, JC_ECOMPILE);
	assert_int_equal(jc_result_cache_status(c), JC_MISS);
	assert_int_equal(jct_stat(d, "compiles"), 3);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_request_free(r);
}

static void test_purge_variants(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *ok90 = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_request *ok80 = jct_request("saxpy.cu", "sm_80", saxpy_exprs);
	jc_request *bad = jct_request_src("bad.cu", bad_src, "sm_90");
	jc_result *a = jct_compile(d, ok90, 0), *b = jct_compile(d, ok80, 0);
	jc_result *c = jct_compile(d, bad, JC_ECOMPILE);
	assert_int_equal(jct_stat(d, "entries"), 2);
	assert_int_equal(jct_stat(d, "negative_entries"), 1);

	char *out = NULL, *err = NULL;
	/* --dry-run removes nothing. */
	const char *dry[] = {"purge", "--all", "--dry-run", NULL};
	assert_int_equal(jct_ctl(d, &out, &err, dry), 0);
	assert_non_null(strstr(out, "would remove 3 entries"));
	free(out);
	free(err);
	assert_int_equal(jct_stat(d, "entries"), 2);
	/* --negative takes only the failure. */
	const char *neg[] = {"purge", "--negative", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, neg), 0);
	assert_int_equal(jct_stat(d, "negative_entries"), 0);
	assert_int_equal(jct_stat(d, "entries"), 2);
	/* --key takes one entry; the next request for it is a miss. */
	const char *key[] = {"purge", "--key", jc_result_key(b), NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, key), 0);
	assert_int_equal(jct_stat(d, "entries"), 1);
	jc_result *b2 = jct_compile(d, ok80, 0);
	assert_int_equal(jc_result_cache_status(b2), JC_MISS);
	/* --older-than 1h keeps everything made just now. */
	const char *old[] = {"purge", "--older-than", "1h", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, old), 0);
	assert_int_equal(jct_stat(d, "entries"), 2);
	/* A bad key or duration is a clear error. */
	const char *badkey[] = {"purge", "--key", "xyz", NULL};
	assert_int_equal(jct_ctl(d, NULL, &err, badkey), 1);
	assert_non_null(strstr(err, "32 hex digits"));
	free(err);
	const char *baddur[] = {"purge", "--older-than", "soon", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, baddur), 2);
	/* --all empties the cache, objects included. */
	const char *all[] = {"purge", "--all", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, all), 0);
	assert_int_equal(jct_stat(d, "entries"), 0);
	assert_int_equal(jct_stat(d, "bytes"), 0);
	jc_result *a2 = jct_compile(d, ok90, 0);
	assert_int_equal(jc_result_cache_status(a2), JC_MISS);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_result_free(b2);
	jc_result_free(a2);
	jc_request_free(ok90);
	jc_request_free(ok80);
	jc_request_free(bad);
}

/* A raw client sending garbage gets an error; others are still served. */
static void test_garbage_client(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* A frame header claiming 1 GiB, then junk. */
	const uint8_t junk[] = {0x00, 0x00, 0x00, 0x40, 0x01, 0x00, 0x00, 0x00, 'g', 'a', 'r', 'b'};
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	uint8_t reply[256];
	ssize_t n = read(fd, reply, sizeof(reply));
	assert_true(n >= 8);
	uint16_t type;
	memcpy(&type, reply + 4, 2);
	assert_int_equal(type, 7); /* JC_MSG_ERROR */
	/* The connection is then closed. */
	while ((n = read(fd, reply, sizeof(reply))) > 0)
		;
	assert_int_equal(n, 0);
	close(fd);

	/* Valid header, unknown message type, before the handshake. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	const uint8_t odd[] = {0x04, 0, 0, 0, 0x63, 0, 0, 0, 1, 2, 3, 4};
	assert_int_equal(write(fd, odd, sizeof(odd)), sizeof(odd));
	n = read(fd, reply, sizeof(reply));
	assert_true(n >= 8);
	memcpy(&type, reply + 4, 2);
	assert_int_equal(type, 7);
	close(fd);

	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *res = jct_compile(d, r, 0);
	assert_non_null(jc_result_data(res, NULL));
	assert_true(jct_stat(d, "bad_requests") >= 2);
	jc_result_free(res);
	jc_request_free(r);
}

static void test_bad_requests_are_refused(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	/* Architecture as an option, a bad arch, a header escaping with "..". */
	jc_request *r = jct_request_src("k.cu", "__global__ void k() {}", "sm_90");
	jc_request_add_option(r, "-arch=sm_80");
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	assert_non_null(strstr(jc_client_errmsg(c), "--arch"));
	jc_request_free(r);
	r = jct_request_src("k.cu", "__global__ void k() {}", "sm_9x");
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	jc_request_free(r);
	/* Well-formed but not supported by this NVRTC: the list is in the error. */
	r = jct_request_src("k.cu", "__global__ void k() {}", "sm_99");
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	assert_non_null(strstr(jc_client_errmsg(c), "sm_90"));
	jc_request_free(r);
	/* A virtual architecture cannot give a cubin. */
	r = jct_request_src("k.cu", "__global__ void k() {}", "compute_90");
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	assert_non_null(strstr(jc_client_errmsg(c), "virtual"));
	jc_request_free(r);
	r = jct_request_src("k.cu", "__global__ void k() {}", "sm_90");
	jc_request_add_header(r, "../etc/passwd", "x", 1);
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	jc_request_free(r);
	/* A bad NVRTC option is the compile's failure, with NVRTC's word for it. */
	r = jct_request_src("k.cu", "__global__ void k() {}", "sm_90");
	jc_request_add_option(r, "--no-such-option");
	assert_int_equal(jc_compile(c, r, &res), JC_ECOMPILE);
	jc_result_free(res);
	jc_request_free(r);
	/* The connection still works. */
	r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	assert_int_equal(jc_compile(c, r, &res), 0);
	jc_result_free(res);
	jc_request_free(r);
	jc_client_close(c);
}

/* A client that claims a good object failed its hash check does not get it
 * quarantined: the daemon checks the object itself first. */
static void test_false_corruption_claim(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *a = jct_compile(d, r, 0);
	char *out = NULL;
	const char *show[] = {"show", jc_result_key(a), NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, show), 0);
	char *obj = strstr(out, "\nobject");
	assert_non_null(obj);
	obj += strlen("\nobject");
	while (*obj == ' ')
		obj++;
	obj[32] = '\0';
	assert_int_equal(jc__unhex16(obj, r->req.reject_object), 0);
	free(out);
	r->req.reject_reason = JC_REJECT_CORRUPT;
	for (int i = 0; i < 3; i++) {
		jc_result *b = jct_compile(d, r, 0);
		assert_int_equal(jc_result_cache_status(b), JC_HIT);
		jc_result_free(b);
	}
	assert_int_equal(jct_stat(d, "corrupt_objects"), 0);
	assert_int_equal(jct_stat(d, "compiles"), 1);
	jc_result_free(a);
	jc_request_free(r);
}

/* SIGTERM while a client waits on a compile: the client is told the daemon
 * is shutting down (not a reset connection), and the daemon exits 0. */
static void test_sigterm_during_compile(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	char errpath[160];
	snprintf(errpath, sizeof(errpath), "%s/waiter.err", d->dir);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char *err = NULL;
		const char *args[] = {
		    "compile",	  jct_example("cub_sort.cu"),	    "--arch", "sm_90", "--",
		    "-std=c++17", "-I/usr/local/cuda/include/cccl", NULL};
		int rc = jct_ctl(d, NULL, &err, args);
		FILE *f = fopen(errpath, "w");
		fputs(err, f);
		fclose(f);
		_exit(rc);
	}
	/* The CUB compile takes about a second: stop the daemon inside it. */
	for (int i = 0; i < 200 && jct_stat(d, "misses") < 1; i++)
		usleep(5000);
	usleep(100000);
	assert_int_equal(jtl_daemon_stop(d), 0);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	size_t n;
	char *err = (char *)jtl_read_file(errpath, &n);
	assert_non_null(err);
	if (!strstr(err, "shutting down"))
		fprintf(stderr, "waiter said: %s\n", err);
	assert_non_null(strstr(err, "shutting down"));
	free(err);
}

static void test_second_daemon_refused(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	struct jtl_daemon other = *d;
	snprintf(other.sock, sizeof(other.sock), "%s/sock2", d->dir);
	snprintf(other.log, sizeof(other.log), "%s/daemon2.log", d->dir);
	jct_daemon_spawn(&other, NULL);
	assert_int_not_equal(jtl_daemon_wait(&other), 0);
	size_t n;
	char *log = (char *)jtl_read_file(other.log, &n);
	assert_non_null(log);
	if (!strstr(log, "in use by another jitcached"))
		fprintf(stderr, "second daemon said: %s\n", log);
	assert_non_null(strstr(log, "in use by another jitcached"));
	free(log);

	/* Removing DIR/lock does not let a second daemon in: the first takes a
	 * new lock file within its one-second tick. */
	char lock[128];
	snprintf(lock, sizeof(lock), "%s/lock", d->cache);
	assert_int_equal(unlink(lock), 0);
	usleep(1600000);
	snprintf(other.log, sizeof(other.log), "%s/daemon3.log", d->dir);
	jct_daemon_spawn(&other, NULL);
	assert_int_not_equal(jtl_daemon_wait(&other), 0);
	log = (char *)jtl_read_file(other.log, &n);
	assert_non_null(log);
	assert_non_null(strstr(log, "in use by another jitcached"));
	free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_miss_then_hit_identical, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lowered_names_match_nvrtc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_arch_is_separate_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_negative_entry_and_ttl, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_purge_variants, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_requests_are_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_daemon_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sigterm_during_compile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_false_corruption_claim, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
