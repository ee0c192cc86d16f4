/* SPDX-License-Identifier: MIT */
/*
 * jitcache-fresh-hit SOCKET SOURCE NAME_EXPR T0_NS: what a fresh process
 * pays for its first kernel from a warm cache, without a GPU (the GPU
 * machine's examples/gpu/coldstart adds the driver's phases). Linked with
 * the shared client library, as applications are. SOURCE (a file) is
 * requested for sm_90 with NAME_EXPR, as jitcache-bench's SAXPY request.
 * T0_NS: the parent's CLOCK_MONOTONIC (jc__now_ns) just before fork.
 * Prints one line: "fresh exec_us=E connect_us=C hit_us=H server_us=S"
 * (exec: from T0 to main; connect: jc_client_connect with the handshake;
 * hit: the first jc_compile, a hit, with its bytes checked; server: the
 * daemon's time in it, JC_TIME_SERVER) and exits 0, or 1 with a
 * message when the answer is not a hit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jitcache/jitcache.h"

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	uint64_t t_main = now_ns();
	if (argc != 5) {
		fprintf(stderr, "usage: jitcache-fresh-hit SOCKET SOURCE NAME_EXPR T0_NS\n");
		return 2;
	}
	static char src[1 << 16];
	FILE *f = fopen(argv[2], "rb");
	size_t n = f ? fread(src, 1, sizeof(src), f) : 0;
	if (f)
		fclose(f);
	jc_request *r = NULL;
	if (!n || n == sizeof(src) || jc_request_new(&r) != 0 ||
	    jc_request_set_source(r, "saxpy.cu", src, n) != 0 ||
	    jc_request_set_arch(r, "sm_90") != 0 ||
	    jc_request_add_name_expression(r, argv[3]) != 0) {
		fprintf(stderr, "jitcache-fresh-hit: cannot build the request of %s\n", argv[2]);
		return 1;
	}
	uint64_t t0 = now_ns();
	jc_client *c = NULL;
	jc_result *res = NULL;
	if (jc_client_connect(argv[1], &c) != 0) {
		fprintf(stderr, "jitcache-fresh-hit: %s\n", jc_client_errmsg(NULL));
		return 1;
	}
	uint64_t t1 = now_ns();
	int rc = jc_compile(c, r, &res);
	uint64_t t2 = now_ns();
	if (rc != 0 || jc_result_cache_status(res) != JC_HIT) {
		fprintf(stderr, "jitcache-fresh-hit: not a hit: %s\n",
			rc ? jc_client_errmsg(c) : "miss");
		return 1;
	}
	printf("fresh exec_us=%.1f connect_us=%.1f hit_us=%.1f server_us=%.1f\n",
	       (double)(t_main - strtoull(argv[4], NULL, 10)) / 1e3, (double)(t1 - t0) / 1e3,
	       (double)(t2 - t1) / 1e3, (double)jc_result_time_ns(res, JC_TIME_SERVER) / 1e3);
	jc_result_free(res);
	jc_client_close(c);
	jc_request_free(r);
	return 0;
}
