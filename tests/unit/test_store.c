/* SPDX-License-Identifier: MIT */
/* The content-addressed store, on real files in a mkdtemp directory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#include <cmocka.h>

#include "common/req.h"
#include "core/store.h"
#include "jitcache/jitcache.h"
#include "tests/lib/test.h"

struct fx {
	char root[JTL_ROOT_MAX]; /* jct_tmpdir */
	char dir[128];		 /* root/cache: created by the store */
	struct jc_store *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	jct_tmpdir(f->root, NULL, "store");
	snprintf(f->dir, sizeof(f->dir), "%s/cache", f->root);
	assert_int_equal(jc__store_open(f->dir, &f->s, err, sizeof(err)), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	jc__store_close(f->s);
	jct_tmpdir_remove(f->root);
	free(f);
	return 0;
}

static void path_of(struct fx *f, const uint8_t h[16], char *out, size_t n)
{
	char hex[33];

	jc__hex16(h, hex);
	snprintf(out, n, "%s/objects/%.2s/%s", f->dir, hex, hex);
}

static int count_files(const char *dir)
{
	char cmd[256];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -type f -o -type l | wc -l", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void sub_path(struct fx *f, const char *sub, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", f->dir, sub);
}

static void put(struct fx *f, const char *text, uint8_t h[16])
{
	char err[256];

	assert_int_equal(jc__store_put(f->s, text, strlen(text), h, err, sizeof(err)), 0);
}

static void test_round_trip(void **state)
{
	struct fx *f = *state;
	const char *text = "// ptx\n.version 8.0\n";
	uint8_t h[16], want[16], *data;
	char path[256];
	struct stat st;
	size_t size;
	int fd;

	put(f, text, h);
	XXH128_canonicalFromHash((XXH128_canonical_t *)want, XXH3_128bits(text, strlen(text)));
	assert_memory_equal(h, want, 16);
	path_of(f, h, path, sizeof(path));
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0400);
	assert_int_equal(st.st_size, strlen(text));

	assert_int_equal(jc__store_open_object(f->s, h, strlen(text), &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(jc__store_verify_fd(fd, h, strlen(text)), 0);
	close(fd);
	assert_int_equal(jc__store_read_object(f->s, h, strlen(text), &data, &size), 0);
	assert_int_equal(size, strlen(text));
	assert_memory_equal(data, text, size);
	free(data);

	/* Empty object, and a large one crossing the read buffer size. */
	put(f, "", h);
	assert_int_equal(jc__store_read_object(f->s, h, 0, &data, &size), 0);
	assert_int_equal(size, 0);
	free(data);
	{
		size_t big = 3 * 65536 + 17;
		uint8_t *buf = malloc(big);
		char err[128];

		assert_non_null(buf);
		for (size_t i = 0; i < big; i++)
			buf[i] = (uint8_t)(i * 31 + 7);
		assert_int_equal(jc__store_put(f->s, buf, big, h, err, sizeof(err)), 0);
		assert_int_equal(jc__store_open_object(f->s, h, big, &fd), 0);
		assert_int_equal(jc__store_verify_fd(fd, h, big), 0);
		close(fd);
		assert_int_equal(jc__store_read_object(f->s, h, big, &data, &size), 0);
		assert_memory_equal(data, buf, big);
		free(data);
		free(buf);
	}
	/* Missing object; remove. */
	memset(want, 0xab, 16);
	assert_int_equal(jc__store_open_object(f->s, want, 1, &fd), JC_ENOTFOUND);
	assert_int_equal(fd, -1);
	assert_int_equal(jc__store_read_object(f->s, want, 1, &data, &size), JC_ENOTFOUND);
	assert_int_equal(jc__store_remove(f->s, h), 0);
	assert_int_equal(jc__store_remove(f->s, h), JC_ENOTFOUND);
	assert_string_equal(jc__store_dir(f->s), f->dir);
}

static void test_dedupe(void **state)
{
	struct fx *f = *state;
	uint8_t h1[16], h2[16];
	char path[256], tmp[256];
	struct stat a, b;
	FILE *fp;

	put(f, "same bytes", h1);
	path_of(f, h1, path, sizeof(path));
	assert_int_equal(stat(path, &a), 0);
	put(f, "same bytes", h2);
	assert_memory_equal(h1, h2, 16);
	assert_int_equal(stat(path, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino); /* kept, not rewritten */
	sub_path(f, "tmp", tmp, sizeof(tmp));
	assert_int_equal(count_files(tmp), 0);
	sub_path(f, "objects", tmp, sizeof(tmp));
	assert_int_equal(count_files(tmp), 1);

	/* A wrong-size file under the right name is replaced, not kept. */
	assert_int_equal(unlink(path), 0);
	fp = fopen(path, "w");
	fputs("x", fp);
	fclose(fp);
	chmod(path, 0444);
	put(f, "same bytes", h2);
	assert_int_equal(stat(path, &b), 0);
	assert_int_equal(b.st_size, strlen("same bytes"));
}

static void test_tmp_emptied(void **state)
{
	struct fx *f = *state;
	char path[256], err[256];

	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/tmp/stale.%d", f->dir, i);
		FILE *fp = fopen(path, "w");
		assert_non_null(fp);
		fputs("partial", fp);
		fclose(fp);
	}
	/* A worker's directory of a client's headers, left by a crash. */
	snprintf(path, sizeof(path), "%s/tmp/jc-tree-x/0/sub", f->dir);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && echo '#define X 1' > '%s/x.h' && ln -s / '%s/up'", path, path,
		 path);
	assert_int_equal(system(cmd), 0);
	jc__store_close(f->s);
	assert_int_equal(jc__store_open(f->dir, &f->s, err, sizeof(err)), 0);
	sub_path(f, "tmp", path, sizeof(path));
	assert_int_equal(count_files(path), 0);
	snprintf(path, sizeof(path), "%s/tmp/jc-tree-x", f->dir);
	assert_int_not_equal(access(path, F_OK), 0);
}

/*
 * tmp/ and quarantine/ removed while the store is open (cleaners of old empty
 * directories remove them: they are empty most of the time) are made again
 * by the next put or quarantine, mode 0700; one replaced by a symbolic link
 * is not followed: the put fails and nothing lands where the link points.
 */
static void test_dirs_removed_while_open(void **state)
{
	struct fx *f = *state;
	uint8_t h[16], q[16];
	char tmp[256], quar[256], path[256], err[256], elsewhere[256];
	struct stat st;

	sub_path(f, "tmp", tmp, sizeof(tmp));
	sub_path(f, "quarantine", quar, sizeof(quar));
	put(f, "before", h);
	put(f, "to quarantine", q);
	assert_int_equal(rmdir(tmp), 0);
	assert_int_equal(rmdir(quar), 0);

	put(f, "after tmp/ was removed", h);
	assert_int_equal(lstat(tmp, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(count_files(tmp), 0);
	path_of(f, h, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, strlen("after tmp/ was removed"));

	/* Each removal again: every one is noticed, not just the first. */
	assert_int_equal(rmdir(tmp), 0);
	put(f, "after a second removal", h);
	assert_int_equal(count_files(tmp), 0);

	assert_int_equal(jc__store_quarantine(f->s, q), 0);
	assert_int_equal(lstat(quar, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(count_files(quar), 1);
	path_of(f, q, path, sizeof(path));
	assert_int_equal(access(path, F_OK), -1);

	/* jc__store_tmp_check (before a tool given the path DIR/tmp starts). */
	assert_int_equal(rmdir(tmp), 0);
	assert_int_equal(jc__store_tmp_check(f->s), 0);
	assert_int_equal(lstat(tmp, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(jc__store_tmp_check(f->s), 0); /* there: nothing to do */
	snprintf(path, sizeof(path), "%s/moved", f->root);
	assert_int_equal(rename(tmp, path), 0); /* moved away: made again too */
	assert_int_equal(jc__store_tmp_check(f->s), 0);
	assert_int_equal(lstat(tmp, &st), 0);
	put(f, "after a move", h);
	assert_int_equal(count_files(path), 0);
	assert_int_equal(rmdir(path), 0);

	/* Removed and replaced by a link to a directory of someone's choosing. */
	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", f->root);
	assert_int_equal(mkdir(elsewhere, 0700), 0);
	assert_int_equal(rmdir(tmp), 0);
	assert_int_equal(symlink(elsewhere, tmp), 0);
	assert_int_equal(jc__store_put(f->s, "not staged", 10, h, err, sizeof(err)), JC_EIO);
	assert_non_null(strstr(err, "/tmp/"));
	assert_int_equal(jc__store_tmp_check(f->s), JC_EIO);
	assert_int_equal(count_files(elsewhere), 0);
	assert_int_equal(unlink(tmp), 0);
	put(f, "after the link went", h);
}

/* Rewrites the object file with fn applied (we may not write 0444 as non-root). */
static void tamper(const char *path, void (*fn)(int fd, off_t size))
{
	struct stat st;
	int fd;

	assert_int_equal(chmod(path, 0644), 0);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	fn(fd, st.st_size);
	close(fd);
	assert_int_equal(chmod(path, 0444), 0);
}

static void trunc_zero(int fd, off_t size)
{
	(void)size;
	assert_int_equal(ftruncate(fd, 0), 0);
}

static void trunc_half(int fd, off_t size)
{
	assert_int_equal(ftruncate(fd, size / 2), 0);
}

static void flip_byte(int fd, off_t size)
{
	uint8_t c;

	assert_int_equal(pread(fd, &c, 1, size / 3), 1);
	c ^= 0x10;
	assert_int_equal(pwrite(fd, &c, 1, size / 3), 1);
}

static void append_byte(int fd, off_t size)
{
	assert_int_equal(pwrite(fd, "z", 1, size), 1);
}

static const char payload[] = "some cubin bytes, long enough to cut in half";

/* Corruption seen by the cheap open (size) or by the full check (content). */
static void check_corrupt(struct fx *f, void (*fn)(int, off_t), int caught_by_open)
{
	uint8_t h[16], *data;
	char path[256];
	size_t size;
	int fd;

	put(f, payload, h);
	path_of(f, h, path, sizeof(path));
	tamper(path, fn);
	if (caught_by_open) {
		assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
		assert_int_equal(fd, -1);
	} else {
		assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), 0);
		assert_int_equal(jc__store_verify_fd(fd, h, strlen(payload)), JC_ECORRUPT);
		close(fd);
	}
	assert_int_equal(jc__store_read_object(f->s, h, strlen(payload), &data, &size),
			 JC_ECORRUPT);
	/* Quarantine moves it aside; the name is free for a fresh put. */
	assert_int_equal(jc__store_quarantine(f->s, h), 0);
	assert_int_equal(access(path, F_OK), -1);
	sub_path(f, "quarantine", path, sizeof(path));
	assert_int_equal(count_files(path), 1);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ENOTFOUND);
	assert_int_equal(jc__store_quarantine(f->s, h), JC_ENOTFOUND);
	put(f, payload, h);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), 0);
	assert_int_equal(jc__store_verify_fd(fd, h, strlen(payload)), 0);
	close(fd);
}

static void test_truncated_zero(void **state)
{
	check_corrupt(*state, trunc_zero, 1);
}

static void test_truncated_half(void **state)
{
	check_corrupt(*state, trunc_half, 1);
}

static void test_flipped_byte(void **state)
{
	check_corrupt(*state, flip_byte, 0);
}

static void test_grown(void **state)
{
	struct fx *f = *state;
	uint8_t h[16];
	char path[256];
	int fd;

	/* The size check at open catches it; verify_fd alone also must. */
	put(f, payload, h);
	path_of(f, h, path, sizeof(path));
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), 0);
	tamper(path, append_byte);
	assert_int_equal(jc__store_verify_fd(fd, h, strlen(payload)), JC_ECORRUPT);
	close(fd);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
}

static void test_symlink(void **state)
{
	struct fx *f = *state;
	uint8_t h[16];
	char path[256], copy[256];
	int fd;

	put(f, payload, h);
	path_of(f, h, path, sizeof(path));
	snprintf(copy, sizeof(copy), "%s/elsewhere", f->root);
	assert_int_equal(rename(path, copy), 0);
	assert_int_equal(symlink(copy, path), 0);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
	assert_int_equal(fd, -1);
	assert_int_equal(jc__store_quarantine(f->s, h), 0);
	assert_int_equal(access(copy, F_OK), 0); /* the link moved, not its target */
}

static void test_wrong_mode(void **state)
{
	struct fx *f = *state;
	uint8_t h[16];
	char path[256];
	int fd;

	put(f, payload, h);
	path_of(f, h, path, sizeof(path));
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
	assert_int_equal(chmod(path, 0464), 0);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
	/* A put replaces the untrusted file. */
	put(f, payload, h);
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), 0);
	close(fd);
}

static void test_fifo(void **state)
{
	struct fx *f = *state;
	uint8_t h[16];
	char path[256];
	int fd;

	put(f, payload, h);
	path_of(f, h, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0444), 0);
	/* Must not block waiting for a writer. */
	assert_int_equal(jc__store_open_object(f->s, h, strlen(payload), &fd), JC_ECORRUPT);
}

static void test_lock(void **state)
{
	struct fx *f = *state;
	int go[2], ready[2], fd, fd2;
	char err[256], c;
	pid_t pid;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int lfd = jc__store_lock(f->dir, 0, NULL, 0);

		if (write(ready[1], lfd >= 0 ? "y" : "n", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(jc__store_lock(f->dir, 0, err, sizeof(err)), JC_ELOCKED);
	assert_non_null(strstr(err, "in use"));
	{
		char want[32];

		snprintf(want, sizeof(want), "pid %d", (int)pid);
		assert_non_null(strstr(err, want));
	}
	assert_int_equal(jc__store_lock(f->dir, 120, err, sizeof(err)), JC_ELOCKED);
	/* Waiting covers the holder's exit. */
	assert_int_equal(write(go[1], "x", 1), 1);
	fd = jc__store_lock(f->dir, 5000, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	{
		int status;

		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	/* A second descriptor in the same process is refused too. */
	fd2 = jc__store_lock(f->dir, 0, err, sizeof(err));
	assert_int_equal(fd2, JC_ELOCKED);
	close(fd);
	fd2 = jc__store_lock(f->dir, 0, err, sizeof(err));
	assert_true(fd2 >= 0);
	close(fd2);
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	assert_int_equal(jc__store_lock("", 0, err, sizeof(err)), JC_EINVAL);
}

struct seen {
	int good, bad;
};

static int count_cb(const uint8_t *hash, const char *path, const struct stat *st, void *ctx)
{
	struct seen *s = ctx;

	assert_non_null(path);
	assert_non_null(st);
	if (hash) {
		char hex[33];

		jc__hex16(hash, hex);
		assert_non_null(strstr(path, hex));
		s->good++;
	} else {
		s->bad++;
	}
	return 0;
}

static int stop_cb(const uint8_t *hash, const char *path, const struct stat *st, void *ctx)
{
	(void)hash;
	(void)path;
	(void)st;
	return ++*(int *)ctx == 2 ? 42 : 0;
}

static void test_foreach(void **state)
{
	struct fx *f = *state;
	struct seen s = {0, 0};
	uint8_t h[16];
	char path[256], hex[33];
	FILE *fp;
	int n = 0;

	put(f, "one", h);
	put(f, "two", h);
	put(f, "three", h);
	jc__hex16(h, hex);
	/* Bad names: uppercase, wrong directory, junk at the top level. */
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.tmp", f->dir, hex, hex);
	fp = fopen(path, "w");
	fclose(fp);
	snprintf(path, sizeof(path), "%s/objects/%.2s/ABCDEF0123456789ABCDEF0123456789", f->dir,
		 hex);
	fp = fopen(path, "w");
	fclose(fp);
	snprintf(path, sizeof(path), "%s/objects/junk", f->dir);
	fp = fopen(path, "w");
	fclose(fp);
	assert_int_equal(jc__store_foreach(f->s, count_cb, &s), 0);
	assert_int_equal(s.good, 3);
	assert_int_equal(s.bad, 3);
	assert_int_equal(jc__store_foreach(f->s, stop_cb, &n), 42);
	assert_int_equal(n, 2);
}

static void test_free_bytes(void **state)
{
	struct fx *f = *state;
	uint64_t free_b = 0;

	assert_int_equal(jc__store_free_bytes(f->s, &free_b), 0);
	assert_true(free_b > 0);
}

static mode_t mode_of(const char *root, const char *rel)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/* The store belongs to our uid alone: the old group-shared layout (02770
 * directories, a 0644 index) is closed at open; a world-writable DIR too. */
static void test_modes_and_owner(void **state)
{
	struct fx *f = *state;
	struct jc_store *s2;
	char dir[256], path[400], err[512];

	snprintf(dir, sizeof(dir), "%s/shared", f->root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 02770), 0);
	static const char *const subs[] = {"objects", "tmp", "quarantine", "manifests",
					   "objects/ab"};
	for (size_t i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		assert_int_equal(mkdir(path, 0700), 0);
		assert_int_equal(chmod(path, 02770), 0);
	}
	snprintf(path, sizeof(path), "%s/index.sqlite", dir);
	close(open(path, O_WRONLY | O_CREAT, 0644));
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), 0);
	jc__store_close(s2);
	jc__store_close(NULL);
	assert_int_equal(mode_of(dir, "."), 0700);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(mode_of(dir, subs[i]), 0700);
	assert_int_equal(mode_of(dir, "index.sqlite"), 0600);

	assert_int_equal(mode_of(f->dir, "."), 0700);
	snprintf(dir, sizeof(dir), "%s/ww", f->root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), 0);
	jc__store_close(s2);
	assert_int_equal(mode_of(dir, "."), 0700);

	/* A symbolic link where the index belongs is refused, naming it. */
	snprintf(dir, sizeof(dir), "%s/link", f->root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/index.sqlite", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), JC_EDENIED);
	assert_non_null(strstr(err, "index.sqlite is not a regular file, a symbolic link"));
	if (geteuid() != 0) {
		print_message("not root: skipping the foreign-owner cases\n");
		return;
	}
	assert_int_equal(unlink(path), 0);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	assert_int_equal(chown(path, 12345, 12345), 0);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), JC_EDENIED);
	print_message("%s\n", err);
	assert_non_null(
	    strstr(err, "index.sqlite is not owned by the daemon's uid (owner uid 12345"));
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(chown(dir, 12345, 12345), 0);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), JC_EDENIED);
	assert_non_null(strstr(err, "owned by uid 12345"));
}

/* Open descriptors, read in-process (a find through popen races with the
 * pipe popen itself opens and closes). */
static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(dir);
	while (readdir(dir))
		n++;
	closedir(dir);
	return n;
}

/* Each step of the open ladder fails cleanly: no descriptor or memory left. */
static void test_open_failures(void **state)
{
	struct fx *f = *state;
	static const char *const subs[] = {"objects", "tmp", "quarantine"};
	struct jc_store *s2 = NULL;
	char dir[256], path[300], err[256];
	int before = count_fds();

	for (int i = 0; i < 3; i++) {
		snprintf(dir, sizeof(dir), "%s/bad%d", f->root, i);
		assert_int_equal(mkdir(dir, 0700), 0);
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		fclose(fopen(path, "w")); /* a file where a directory belongs */
		assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), JC_EDENIED);
		assert_null(s2);
		assert_non_null(strstr(err, subs[i]));
	}
	snprintf(dir, sizeof(dir), "%s/bad0/objects/below", f->root);
	assert_int_equal(jc__store_open(dir, &s2, err, sizeof(err)), JC_EIO);
	assert_int_equal(jc__store_open("", &s2, err, sizeof(err)), JC_EINVAL);
	assert_int_equal(jc__store_lock(dir, 0, err, sizeof(err)), JC_EIO);
	assert_int_equal(count_fds(), before);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* A private mount namespace: as root, or in a user namespace mapping our ids. */
static int private_mounts(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWNS) == 0)
		return 0;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0 ||
	    write_file("/proc/self/setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
	return write_file("/proc/self/gid_map", map);
}

/*
 * A put onto a full filesystem: a 64 KiB tmpfs mounted in a private mount
 * namespace of a child process (root, or unprivileged user namespaces;
 * skipped without either). Exit codes: 0 pass, 77 skip, else the failed step.
 */
static int enospc_child(const char *mnt)
{
	struct jc_store *s;
	char err[256], path[300];
	uint8_t h[16], *big;
	size_t n = 256 * 1024;

	if (private_mounts() < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("jc-test", mnt, "tmpfs", 0, "size=64k,mode=0700") < 0)
		return 77;
	if (jc__store_open(mnt, &s, err, sizeof(err)))
		return 1;
	big = calloc(1, n);
	if (!big || jc__store_put(s, "small", 5, h, err, sizeof(err)) != 0)
		return 2;
	if (jc__store_put(s, big, n, h, err, sizeof(err)) != JC_ENOSPC || !strstr(err, "space"))
		return 3;
	snprintf(path, sizeof(path), "%s/tmp", mnt);
	if (count_files(path) != 0)
		return 4;
	snprintf(path, sizeof(path), "%s/objects", mnt);
	if (count_files(path) != 1)
		return 5;
	/* Still usable once the big write failed. */
	if (jc__store_put(s, "after", 5, h, err, sizeof(err)) != 0)
		return 6;
	free(big);
	jc__store_close(s);
	umount(mnt);
	return 0;
}

static void test_enospc(void **state)
{
	struct fx *f = *state;
	char mnt[256];
	int status;
	pid_t pid;

	snprintf(mnt, sizeof(mnt), "%s/full", f->root);
	assert_int_equal(mkdir(mnt, 0700), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(enospc_child(mnt));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message(
		    "cannot mount a tmpfs here (needs root or user namespaces): "
		    "skipping the ENOSPC case; the loop-image integration test covers it\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_round_trip),
	    T(test_dedupe),
	    T(test_tmp_emptied),
	    T(test_truncated_zero),
	    T(test_truncated_half),
	    T(test_flipped_byte),
	    T(test_grown),
	    T(test_symlink),
	    T(test_wrong_mode),
	    T(test_fifo),
	    T(test_lock),
	    T(test_foreach),
	    T(test_free_bytes),
	    T(test_modes_and_owner),
	    T(test_open_failures),
	    T(test_enospc),
	    T(test_dirs_removed_while_open),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
