/* SPDX-License-Identifier: MIT */
/*
 * Every counter survives a clean stop (SIGTERM) and restart: counters that
 * change on paths other than the request path (a malformed frame refused by
 * the connection code, a compile killed at --compile-timeout by the worker
 * pool) are written at the stop like the others. Against a real daemon and
 * real workers (a hang provoked with JITCACHE_TEST_FAULTS=1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "proto/io.h"
#include "proto/proto.h"
#include "tests/lib/test.h"

/* Sends a COMPILE frame whose field claims more bytes than the frame holds
 * after a good handshake: refused by the connection code (bad_requests). */
static void malformed_request(const struct jtl_daemon *d)
{
	int fd = jct_raw_hello(d);
	struct jc_buf b = {0};
	uint16_t type;
	const uint8_t bad[] = {10, 0,	 0,    0,    JC_MSG_COMPILE, 0, 0, 0, 1,
			       0,  0xff, 0xff, 0xff, 0x7f,	     1, 2, 3, 4};
	assert_int_equal(jc__io_write_all(fd, bad, sizeof(bad)), 0);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), 0);
	assert_int_equal(type, JC_MSG_ERROR);
	jc__buf_free(&b);
	close(fd);
}

static void test_refusals_survive_restart(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	malformed_request(d);
	malformed_request(d);
	/* No stats before the stop: nothing but the refusals changes a
	 * counter (a stats command, through the watch counts, would). */
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, NULL);
	assert_int_equal(jct_stat(d, "bad_requests"), 2);
}

static void test_timeouts_survive_restart(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--workers", "1", "--compile-timeout", "1", NULL};
	setenv("JITCACHE_TEST_FAULTS", "1", 1);
	jct_daemon_start(d, flags);
	unsetenv("JITCACHE_TEST_FAULTS");
	jc_request *r = jct_request_src(
	    "hang.cu", "extern \"C\" __global__ void k(float *x) { x[0] = 1; }\n", "sm_90");
	assert_int_equal(jc__request_set_test_fault(r, JC_FAULT_HANG), 0);
	char msg[512];
	assert_null(jct_compile_msg(d, r, JC_ETIMEOUT, msg, sizeof(msg)));
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, flags);
	assert_int_equal(jct_stat(d, "compile_timeouts"), 1);
	assert_int_equal(jct_stat(d, "worker_crashes"), 1); /* the killed worker */
	assert_int_equal(jct_stat(d, "compiles"), 1);
	jc_request_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_refusals_survive_restart, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_timeouts_survive_restart, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
