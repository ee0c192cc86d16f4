/* SPDX-License-Identifier: MIT */
/*
 * The kernel confinement itself (core/confine.c), without NVRTC and
 * without the worker's interposers: in a child confined to one directory,
 * raw system calls may read files and list directories beneath it and read
 * /etc/localtime, and nothing else: no file outside (also not through a
 * symbolic link or a ".." climb), no write, no new file, no execution. Each
 * kind this kernel offers is tried; one it lacks is skipped with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/confine.h"
#include "jitcache/jitcache.h"
#include "tests/lib/test.h"

struct fx {
	char root[JTL_ROOT_MAX];
	char allowed[128], outside[128], cwd[128];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	jct_tmpdir(f->root, NULL, "confine");
	snprintf(f->allowed, sizeof(f->allowed), "%s/allowed", f->root);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->root);
	snprintf(f->cwd, sizeof(f->cwd), "%s/cwd", f->root);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/sub %s %s && echo in > %s/sub/in.h && echo secret > %s/s.h && "
		 "ln -s %s/s.h %s/link.h && chmod 0500 %s",
		 f->allowed, f->outside, f->cwd, f->allowed, f->outside, f->outside, f->allowed,
		 f->cwd);
	assert_int_equal(system(cmd), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	jct_tmpdir_remove(f->root);
	free(f);
	return 0;
}

static int raw_open(const char *path, int flags)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : -errno;
}

/* In a child confined with kind: a bitmask of checks that failed (0: all held). */
static int confined_checks(const struct fx *f, int kind)
{
	const char *roots[] = {f->allowed};
	char err[256], p[256];
	if (chdir(f->cwd) != 0 ||
	    jc__confine_apply(kind, roots, 1, f->cwd, err, sizeof(err)) != 0) {
		fprintf(stderr, "confine %s: %s\n", jc__confine_name(kind), err);
		return 1 << 30;
	}
	int bad = 0, i = 0;
	snprintf(p, sizeof(p), "%s/sub/in.h", f->allowed);
	bad |= (raw_open(p, O_RDONLY) != 0) << i++;			   /* 0: read beneath */
	bad |= (raw_open(f->allowed, O_RDONLY | O_DIRECTORY) != 0) << i++; /* 1: list it */
	bad |= (raw_open("/etc/localtime", O_RDONLY) != 0 && access("/etc/localtime", F_OK) == 0)
	       << i++; /* 2: the time zone */
	snprintf(p, sizeof(p), "%s/s.h", f->outside);
	bad |= (raw_open(p, O_RDONLY) == 0) << i++; /* 3: outside */
	snprintf(p, sizeof(p), "%s/link.h", f->allowed);
	bad |= (raw_open(p, O_RDONLY) == 0) << i++; /* 4: a link out */
	snprintf(p, sizeof(p), "%s/../outside/s.h", f->allowed);
	bad |= (raw_open(p, O_RDONLY) == 0) << i++;		       /* 5: a climb out */
	bad |= (raw_open("/etc/passwd", O_RDONLY) == 0) << i++;	       /* 6: system files */
	bad |= (raw_open("/proc/self/environ", O_RDONLY) == 0) << i++; /* 7: process state */
	snprintf(p, sizeof(p), "%s/sub/in.h", f->allowed);
	bad |= (raw_open(p, O_WRONLY) == 0) << i++; /* 8: no write */
	snprintf(p, sizeof(p), "%s/new.h", f->allowed);
	bad |= (raw_open(p, O_WRONLY | O_CREAT) == 0) << i++;	    /* 9: no new file */
	bad |= (raw_open("new.h", O_WRONLY | O_CREAT) == 0) << i++; /* 10: none in cwd */
	bad |= (raw_open("/bin/sh", O_RDONLY) == 0) << i++;	    /* 11: nothing to exec */
	return bad;
}

static void run_kind(const struct fx *f, int kind)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(confined_checks(f, kind) ? 1 : 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		/* Say which check failed: run them again here, reported. */
		int p[2];
		assert_int_equal(pipe(p), 0);
		pid = fork();
		if (pid == 0) {
			int bad = confined_checks(f, kind);
			_exit(write(p[1], &bad, sizeof(bad)) == sizeof(bad) ? 0 : 1);
		}
		int bad = -1;
		assert_int_equal(read(p[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
		waitpid(pid, &st, 0);
		fail_msg("confinement %s: checks failed, mask 0x%x", jc__confine_name(kind), bad);
	}
}

static void test_landlock(void **state)
{
	int abi;
	char why[128];
	if (jc__confine_detect(&abi, why, sizeof(why)) != JC_CONFINE_LANDLOCK) {
		fprintf(stderr, "skipped: %s\n", why);
		skip();
	}
	run_kind(*state, JC_CONFINE_LANDLOCK);
}

static void test_userns(void **state)
{
	if (system("unshare --user --mount true 2>/dev/null") != 0) {
		fprintf(stderr, "skipped: user namespaces are refused here\n");
		skip();
	}
	run_kind(*state, JC_CONFINE_USERNS);
}

static void test_names(void **state)
{
	(void)state;
	for (int k = JC_CONFINE_NONE; k <= JC_CONFINE_USERNS; k++)
		assert_int_equal(jc__confine_parse(jc__confine_name(k)), k);
	assert_int_equal(jc__confine_parse("auto"), -1);
	assert_null(jc__confine_name(7));
	char err[64];
	assert_int_equal(jc__confine_apply(7, NULL, 0, "/", err, sizeof(err)), JC_EINTERNAL);
	assert_int_equal(jc__confine_apply(JC_CONFINE_NONE, NULL, 0, "/", err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test_setup_teardown(test_landlock, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_userns, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
