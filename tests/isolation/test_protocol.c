/* SPDX-License-Identifier: MIT */
/*
 * Protocol robustness against a real daemon, with raw sockets playing bad
 * clients: oversized frames are refused with an error; a client that sends
 * half a frame and stalls, trickles bytes, says nothing, or does not read
 * its answers is dropped at --idle-timeout while other clients are served
 * at once; past --max-connections a client is told so and turned away.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "harness.h"
#include "io.h"
#include "proto.h"

static const char *const saxpy_exprs[] = {"&saxpy<float>", NULL};

static void send_all(int fd, const void *p, size_t n)
{
	assert_int_equal(jc__io_write_all(fd, p, n), 0);
}

/* Connects and does the handshake. */
static int raw_hello(const struct jc_test_daemon *d)
{
	int fd = jct_raw_connect(d);
	struct jc_buf b = {0};
	uint16_t type;
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, JC_PROTO_VERSION, "raw test"), 0);
	send_all(fd, b.data, b.len);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), 0);
	assert_int_equal(type, JC_MSG_HELLO_OK);
	jc__buf_free(&b);
	return fd;
}

/* Expects an ERROR frame with code and a message holding want, then EOF. */
static void expect_error_then_eof(int fd, int code, const char *want)
{
	struct jc_buf b = {0};
	uint16_t type;
	int got = 0;
	char *msg = NULL;
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), 0);
	assert_int_equal(type, JC_MSG_ERROR);
	assert_int_equal(jc__decode_error(b.data, b.len, &got, &msg), 0);
	if (!strstr(msg, want))
		fprintf(stderr, "error message: %s\n", msg);
	assert_int_equal(got, code);
	assert_non_null(strstr(msg, want));
	free(msg);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), JC_EIO);
	jc__buf_free(&b);
}

/* Waits until the daemon closes fd (EOF or reset), reading and counting
 * what comes; returns the seconds waited (fails after limit_s). */
static double wait_closed(int fd, double limit_s, size_t *bytes)
{
	double t0 = jct_now_s();
	char buf[65536];
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left_ms = (int)((limit_s - (jct_now_s() - t0)) * 1000);
		assert_true(left_ms > 0);
		if (poll(&p, 1, left_ms) == 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0 && bytes) {
			*bytes += (size_t)n;
			continue;
		}
		assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
		return jct_now_s() - t0;
	}
}

/* A hit through the client library; returns the seconds it took. */
static double timed_hit(const struct jc_test_daemon *d, const jc_request *r)
{
	double t0 = jct_now_s();
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	assert_int_equal(jc_result_cache_status(res), JC_HIT);
	jc_result_free(res);
	jc_client_close(c);
	return jct_now_s() - t0;
}

static void test_oversized_frames(void **state)
{
	struct jc_test_daemon *d = *state;
	jct_daemon_start(d, NULL);
	/* Before the handshake a frame is at most 4 KiB. */
	int fd = jct_raw_connect(d);
	uint8_t hdr[JC_FRAME_HDR] = {0x88, 0x13, 0, 0, JC_MSG_HELLO, 0, 0, 0}; /* 5000 bytes */
	send_all(fd, hdr, sizeof(hdr));
	expect_error_then_eof(fd, JC_ETOOBIG, "frame larger than the limit (4096 bytes)");
	close(fd);
	/* After it, JC_FRAME_MAX (64 MiB); one byte more is refused from the
	 * header alone, before anything is buffered. */
	fd = raw_hello(d);
	uint32_t len = JC_FRAME_MAX + 1;
	uint8_t big[JC_FRAME_HDR] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
				     (uint8_t)(len >> 24), JC_MSG_COMPILE, 0, 0, 0};
	send_all(fd, big, sizeof(big));
	expect_error_then_eof(fd, JC_ETOOBIG, "frame larger than the limit");
	close(fd);
	/* A frame whose payload is bigger than the field it claims to hold. */
	fd = raw_hello(d);
	const uint8_t bad[] = {10, 0, 0, 0, JC_MSG_COMPILE, 0, 0, 0,
			       1, 0, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4};
	send_all(fd, bad, sizeof(bad));
	expect_error_then_eof(fd, JC_EPROTO, "malformed COMPILE request");
	close(fd);
	assert_int_equal(jct_stat(d, "bad_requests"), 3);
	/* Everyone else is served. */
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	jc_result_free(res);
	jc_client_close(c);
	jc_request_free(r);
}

/* Half a frame, then nothing: dropped at the idle timeout; others served. */
static void test_stalled_half_frame(void **state)
{
	struct jc_test_daemon *d = *state;
	const char *const flags[] = {"--idle-timeout", "2", NULL};
	jct_daemon_start(d, flags);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	jc_result_free(res);
	jc_client_close(c);

	int fd = raw_hello(d);
	struct jc_buf b = {0};
	assert_int_equal(jc__encode_req(&b, &((struct jc_request *)r)->req), 0);
	send_all(fd, b.data, b.len / 2);
	double t0 = jct_now_s();
	/* Meanwhile, hits are answered at once (5 of them, all while it stalls). */
	double worst = 0;
	for (int i = 0; i < 5; i++) {
		double s = timed_hit(d, r);
		worst = s > worst ? s : worst;
	}
	assert_true(worst < 0.5);
	assert_true(jct_now_s() - t0 < 1.5);
	wait_closed(fd, 6, NULL);
	double waited = jct_now_s() - t0;
	fprintf(stderr, "half frame: dropped after %.2f s (idle timeout 2 s); slowest hit meanwhile "
		"%.1f ms\n", waited, worst * 1e3);
	assert_true(waited >= 1.8 && waited < 4.0);
	assert_true(jct_log_count(d, "request not complete within --idle-timeout"));
	close(fd);
	jc__buf_free(&b);
	jc_request_free(r);
}

/* Bytes trickling in keep no connection alive past the timeout. */
static void test_trickle(void **state)
{
	struct jc_test_daemon *d = *state;
	const char *const flags[] = {"--idle-timeout", "2", NULL};
	jct_daemon_start(d, flags);
	int fd = raw_hello(d);
	uint8_t hdr[JC_FRAME_HDR] = {0xd0, 0x07, 0, 0, JC_MSG_COMPILE, 0, 0, 0}; /* 2000 bytes */
	send_all(fd, hdr, sizeof(hdr));
	double t0 = jct_now_s();
	int sent = 0;
	for (;;) {
		uint8_t byte = 0;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 250) == 1) /* EOF: dropped */
			break;
		if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1)
			break;
		sent++;
		assert_true(jct_now_s() - t0 < 6);
	}
	wait_closed(fd, 2, NULL);
	double waited = jct_now_s() - t0;
	fprintf(stderr, "trickle: %d bytes in %.2f s, then dropped\n", sent, waited);
	assert_true(waited >= 1.8 && waited < 4.0);
	assert_true(sent >= 5);
	close(fd);
}

/* A connection that never says anything (at the handshake timeout, or the
 * idle timeout when that is shorter), and one that stops after the
 * handshake, are both closed. */
static void test_silent(void **state)
{
	struct jc_test_daemon *d = *state;
	const char *const flags[] = {"--idle-timeout", "1", NULL};
	jct_daemon_start(d, flags);
	int mute = jct_raw_connect(d), quiet = raw_hello(d);
	double a = wait_closed(mute, 5, NULL), b = wait_closed(quiet, 5, NULL);
	assert_true(a >= 0.8 && a < 3.0);
	assert_true(b < 3.0);
	assert_true(jct_log_count(d, "no handshake within --handshake-timeout"));
	assert_true(jct_log_count(d, "no request within --idle-timeout"));
	close(mute);
	close(quiet);
}

/* A client that sends requests but never reads the answers: the daemon
 * reads no further request until the answer is taken, and drops it at
 * --write-timeout. The answer here is large (a 2 MB compile log goes with every hit),
 * so it cannot hide in the socket buffer. */
static void test_slow_reader(void **state)
{
	struct jc_test_daemon *d = *state;
	const char *const flags[] = {"--write-timeout", "2", NULL};
	jct_daemon_start(d, flags);
	/* A small source with a big log: 4096 calls of a deprecated function. */
	static const char src[] =
		"__attribute__((deprecated(\"padding the compile log with a long message "
		"..................................\")))\n"
		"__device__ void old_fn(float *x) { x[0] += 1; }\n"
		"#define C1 old_fn(x);\n#define C2 C1 C1\n#define C4 C2 C2\n#define C8 C4 C4\n"
		"#define C16 C8 C8\n#define C32 C16 C16\n#define C64 C32 C32\n"
		"#define C128 C64 C64\n#define C256 C128 C128\n#define C512 C256 C256\n"
		"#define C1K C512 C512\n#define C2K C1K C1K\n#define C4K C2K C2K\n"
		"extern \"C\" __global__ void k(float *x) { C4K }\n";
	jc_request *r = jct_request_src("warn.cu", src, "sm_90");
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	size_t log_len = strlen(jc_result_log(res));
	assert_true(log_len > (1u << 20));
	jc_result_free(res);
	jc_client_close(c);
	int64_t hits0 = jct_stat(d, "hits");

	int fd = raw_hello(d);
	struct jc_buf b = {0};
	assert_int_equal(jc__encode_req(&b, &((struct jc_request *)r)->req), 0);
	double t0 = jct_now_s();
	for (int i = 0; i < 5; i++) {
		send_all(fd, b.data, b.len);
		usleep(100000);
	}
	/* Others are served meanwhile. */
	assert_true(timed_hit(d, r) < 0.5);
	sleep(3); /* past the timeout, reading nothing */
	size_t got = 0;
	wait_closed(fd, 3, &got);
	double waited = jct_now_s() - t0;
	fprintf(stderr, "slow reader: dropped within %.2f s having taken %zu of one %zu-byte answer\n",
		waited, got, log_len);
	assert_true(got < log_len); /* not even one whole answer was taken */
	/* One request was answered (the first), plus the timed hit above. */
	assert_int_equal(jct_stat(d, "hits"), hits0 + 2);
	assert_true(jct_log_count(d, "answer not taken within --write-timeout"));
	close(fd);
	jc__buf_free(&b);
	jc_request_free(r);
}

static void test_connection_cap(void **state)
{
	struct jc_test_daemon *d = *state;
	const char *const flags[] = {"--max-connections", "3", NULL};
	jct_daemon_start(d, flags);
	int held[3];
	for (int i = 0; i < 3; i++)
		held[i] = raw_hello(d);
	/* The fourth is told why, through the client library and jitcachectl. */
	jc_client *c = NULL;
	assert_int_equal(jc_client_connect(d->sock, &c), JC_EBUSY);
	assert_null(c);
	assert_non_null(strstr(jc_client_errmsg(NULL), "too many connections (3, --max-connections)"));
	char *err = NULL;
	const char *ping[] = {"ping", NULL};
	assert_int_equal(jct_ctl(d, NULL, &err, ping), 1);
	assert_non_null(strstr(err, "too many connections"));
	free(err);
	assert_true(jct_log_count(d, "refused connection of uid 0"));
	/* One goes: a place is free again (as soon as the daemon has seen it). */
	close(held[0]);
	int rc = JC_EBUSY;
	for (int i = 0; i < 200 && rc == JC_EBUSY; i++) {
		rc = jc_client_connect(d->sock, &c);
		if (rc == JC_EBUSY)
			usleep(10000);
	}
	assert_int_equal(rc, 0);
	jc_client_close(c);
	close(held[1]);
	close(held[2]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_oversized_frames, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_stalled_half_frame, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_trickle, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_silent, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_slow_reader, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
