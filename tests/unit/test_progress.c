/* SPDX-License-Identifier: MIT */
/* Progress of `warm --wait` and `import --wait` (client/progress.h): on a
 * terminal (a pseudo-terminal here) one line redrawn in place, a bar with
 * the counts and an ETA; elsewhere (a pipe) plain lines, one when the
 * counts change at most once a second, and always the last. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/progress.h"

/* Everything readable on fd now (non-blocking), NUL-terminated; malloc'd. */
static char *drain(int fd)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
	ssize_t got;
	while (n < cap - 1 && (got = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	return buf;
}

static void test_terminal(void **state)
{
	(void)state;
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	assert_true(m >= 0);
	assert_int_equal(grantpt(m), 0);
	assert_int_equal(unlockpt(m), 0);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY);
	assert_true(s >= 0);
	FILE *f = fdopen(s, "w");
	assert_non_null(f);
	struct jc_progress p;
	jc__progress_init(&p, f, "warm");
	assert_true(p.tty);
	jc__progress_show(&p, 0, 0, 10, 0);
	usleep(20000);
	jc__progress_show(&p, 4, 1, 10, 0);
	jc__progress_show(&p, 9, 1, 10, 1);
	fclose(f);
	char *out = drain(m);
	close(m);
	/* redrawn in place: each state starts with a carriage return */
	assert_non_null(strstr(out, "\rwarm [..............................] 0/10"));
	assert_non_null(
	    strstr(out, "\rwarm [###############...............] 5/10 (1 failed) ETA 0:00"));
	assert_non_null(strstr(out, "\rwarm [##############################] 10/10 (1 failed) 0s"));
	assert_int_equal(out[strlen(out) - 1], '\n'); /* the last one ends the line */
	free(out);
}

static void test_pipe(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	FILE *f = fdopen(fds[1], "w");
	assert_non_null(f);
	struct jc_progress p;
	jc__progress_init(&p, f, "import");
	assert_false(p.tty);
	jc__progress_show(&p, 1, 0, 10, 0);
	jc__progress_show(&p, 2, 0, 10, 0); /* within the second: no line */
	jc__progress_show(&p, 2, 0, 10, 0);
	jc__progress_show(&p, 8, 2, 10, 1); /* the last: always */
	fclose(f);
	char *out = drain(fds[0]);
	close(fds[0]);
	assert_null(strchr(out, '\r'));
	assert_true(strncmp(out, "import: 1 of 10 done, 0 failed, ", 32) == 0);
	const char *second = strchr(out, '\n') + 1;
	assert_true(strncmp(second, "import: 8 of 10 done, 2 failed, ", 32) == 0);
	assert_string_equal(strchr(second, '\n'), "\n");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_terminal),
	    cmocka_unit_test(test_pipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
