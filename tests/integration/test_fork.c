/* SPDX-License-Identifier: MIT */
/*
 * A handle used on both sides of fork(): the parent and its child each
 * compile sources of their own, at once, on the handle the parent opened
 * before the fork, against a real daemon. Each must get its own artifacts
 * (the child its own connection), never the other's answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#define ROUNDS 200

/* Compiles ROUNDS sources whose kernel is named after who; returns how many
 * results did not hold that kernel (or failed). */
static int compile_own(const struct jtl_daemon *d, jc_client *c, const char *who)
{
	int wrong = 0;
	for (int i = 0; i < ROUNDS; i++) {
		char src[160], name[64];
		/* Half of them hits of an earlier round: hits and misses interleave. */
		snprintf(name, sizeof(name), "k_%s_%d", who, i % (ROUNDS / 2));
		snprintf(src, sizeof(src), "extern \"C\" __global__ void %s(int *p) { *p = 1; }\n",
			 name);
		jc_request *r = jct_request_src("fork.cu", src, "sm_90");
		jc_result *res = NULL;
		int rc = jc_compile(c, r, &res);
		size_t size = 0;
		const void *data = rc == 0 ? jc_result_data(res, &size) : NULL;
		if (rc != 0 || !data || !memmem(data, size, name, strlen(name))) {
			if (wrong++ < 3)
				fprintf(stderr, "%s round %d: rc %d (%s), %s\n", who, i, rc,
					rc ? jc_client_errmsg(c) : "",
					rc ? "" : "another kernel's cubin");
		}
		jc_result_free(res);
		jc_request_free(r);
	}
	(void)d;
	return wrong;
}

static void test_handle_across_fork(void **state)
{
	struct jtl_daemon *d = *state;
	jc_client *c = jct_connect(d);
	jc_request *r = jct_request("saxpy.cu", "sm_90", NULL);
	jc_result_free(jct_compile(d, r, 0));
	jc_request_free(r);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(compile_own(d, c, "child") ? 1 : 0);
	int wrong = compile_own(d, c, "parent"), status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fprintf(stderr, "fork: parent %d of %d wrong; child exit %d\n", wrong, ROUNDS,
		WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	assert_int_equal(wrong, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	jc_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_handle_across_fork, jct_setup_started,
					    jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
