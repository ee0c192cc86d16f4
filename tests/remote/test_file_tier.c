/* SPDX-License-Identifier: MIT */
/*
 * The remote tier on a shared directory (--remote file:///DIR,
 * daemon/remote_file.c): real daemons with their own cache directories on
 * one share, real NVRTC compiles; every artifact served is compared with
 * NVRTC's own output for the source, compiled in this process. Needs no
 * Redis. A full and a read-only share are small tmpfs mounts when this
 * process may mount (root), else a directory of mode 0555.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/req.h"
#include "daemon/remote.h"
#include "tests/lib/test.h"
#include "tests/lib/variants.h"

#define N_DAEMONS 3

struct ffx {
	struct jct_fx *fx;
	struct jtl_daemon d[N_DAEMONS];
	char share[400];
	char url[600];
	char secret[400];
	int mounted;
};

static const char secret_text[] = "the share's secret, 32+ bytes long!";

static struct ffx *ffx_new(void **state, const char *spec, const char *url_opts)
{
	struct ffx *x = calloc(1, sizeof(*x));
	void *fx;
	assert_non_null(x);
	jct_fx_new(&fx, spec);
	x->fx = fx;
	for (int i = 0; i < N_DAEMONS; i++)
		jct_daemon_init(&x->d[i]);
	snprintf(x->share, sizeof(x->share), "%s/share", x->fx->d.dir);
	assert_int_equal(mkdir(x->share, 0755), 0);
	snprintf(x->url, sizeof(x->url), "file://%s%s", x->share, url_opts ? url_opts : "");
	snprintf(x->secret, sizeof(x->secret), "%s/secret", x->fx->d.dir);
	jct_write_text(x->secret, secret_text);
	chmod(x->secret, 0600);
	*state = x;
	return x;
}

static int ffx_free(void **state)
{
	struct ffx *x = *state;
	if (!x)
		return 0;
	for (int i = 0; i < N_DAEMONS; i++)
		jct_daemon_cleanup(&x->d[i]);
	if (x->mounted)
		umount2(x->share, MNT_DETACH);
	chmod(x->share, 0755);
	void *fx = x->fx;
	jct_fx_free(&fx);
	free(x);
	return 0;
}

/* Starts daemon i on the share (x->url unless url) with the secret. */
static void start(struct ffx *x, int i, const char *url)
{
	const char *flags[] = {"--remote", url ? url : x->url, "--remote-secret-file",
			       x->secret,  "--log-level",      "info",
			       NULL};
	jct_daemon_start(&x->d[i], flags);
}

/* Fetches pool variant v from d, checked against NVRTC's output; returns the
 * cache status; the key's hex into key (33 bytes) when not NULL. */
static int fetch(struct ffx *x, const struct jtl_daemon *d, int v, char *key)
{
	return jct_pool_fetch_from(&x->fx->pool, v, d, key);
}

static void purge_all(const struct jtl_daemon *d)
{
	const char *args[] = {"purge", "--all", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, args), 0);
}

/* The path of key's value in the share. */
static void value_path(const struct ffx *x, const char *key, char *out, size_t len)
{
	snprintf(out, len, "%s/%.2s/%s.v", x->share, key, key);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	uint8_t *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Whether the value file of key (hex) holds a complete value signed with
 * the share's secret (remote.h's checks, as a daemon makes them). */
static int value_good(const char *path, const char *key, char *why, size_t whylen)
{
	uint8_t k[16];
	size_t len;
	struct jc_res res;
	assert_int_equal(jc__unhex16(key, k), 0);
	uint8_t *val = read_all(path, &len);
	int rc = jc__remote_value_decode(k, val, len, (const uint8_t *)secret_text,
					 strlen(secret_text), 64u << 20, &res, why, whylen);
	if (rc == 0)
		jc__res_clear(&res);
	free(val);
	return rc == 0;
}

/* Counts the files of the share dir whose names end with suffix; checks
 * every value among them when check. */
static int count_files_in(const char *dir, const char *suffix, int check)
{
	int n = 0;
	for (int i = 0; i < 256; i++) {
		char sub[512];
		snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
		DIR *d = opendir(sub);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			size_t len = strlen(e->d_name), sl = strlen(suffix);
			if (len < sl || strcmp(e->d_name + len - sl, suffix) != 0)
				continue;
			n++;
			if (check) {
				char path[1024], why[200] = "", key[33];
				snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
				snprintf(key, sizeof(key), "%.32s", e->d_name);
				if (!value_good(path, key, why, sizeof(why)))
					fail_msg("%s is not a whole value: %s", path, why);
			}
		}
		if (d)
			closedir(d);
	}
	return n;
}

/* count_files_in of x's share. */
static int count_files(const struct ffx *x, const char *suffix, int check)
{
	return count_files_in(x->share, suffix, check);
}

static int64_t wait_stat(const struct jtl_daemon *d, const char *key, int64_t min)
{
	return jct_wait_stat(d, key, jct_ge, min, 10000);
}

/* Sets the mtime of path to age_s seconds ago. */
static void age(const char *path, int age_s)
{
	struct timeval tv[2];
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= age_s;
	tv[1] = tv[0];
	assert_int_equal(utimes(path, tv), 0);
}

/* --- tests --------------------------------------------------------------- */

/* A compiles and publishes; B, with its own cache directory on the same
 * share, compiles nothing: both variants come from the share. */
static void test_two_daemons(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, NULL);
	start(x, 1, NULL);
	char k0[33], path[1024];
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(fetch(x, a, 1, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2);
	assert_int_equal(jct_stat(a, "remote_misses"), 2);
	value_path(x, k0, path, sizeof(path));
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(count_files(x, ".v", 1), 2);
	assert_int_equal(count_files(x, ".lock", 0), 0); /* released after the value */

	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(fetch(x, b, 1, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 2);
	assert_true(jct_stat(b, "remote_bytes_in") > 0);
	assert_int_equal(jct_stat(b, "remote_rejected"), 0);
	assert_int_equal(jct_stat(b, "remote_tiers"), 1);
	char *json = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(b, &json, NULL, args), 0);
	jct_assert_has(json, "\"remote_state\": \"up\"");
	free(json);
	/* doctor reports the tier from the daemon's stats. */
	char *out = NULL;
	const char *doctor[] = {"doctor", NULL};
	jct_ctl(b, &out, NULL, doctor);
	jct_assert_has(out, "remote tier values are signed");
	free(out);
	printf("two daemons on one share: A compiled 2, B compiled 0 (2 remote hits)\n");
}

/* Replaces the file at path by len bytes at data. */
static void plant_file(const char *path, const void *data, size_t len)
{
	unlink(path);
	jct_write_file(path, data, len);
}

/* Replaces key's value in the share by len bytes at data. */
static void plant(const struct ffx *x, const char *key, const void *data, size_t len)
{
	char path[1024];
	value_path(x, key, path, sizeof(path));
	plant_file(path, data, len);
}

/* B, its cache purged, asks for v: the share's value is rejected, the
 * kernel compiled and served with NVRTC's bytes. */
static void rejected(struct ffx *x, struct jtl_daemon *b, int v, int64_t *n, int64_t *compiles)
{
	purge_all(b);
	assert_int_equal(fetch(x, b, v, NULL), JC_MISS);
	assert_int_equal(jct_stat(b, "remote_rejected"), ++*n);
	assert_int_equal(jct_stat(b, "compiles"), ++*compiles);
	assert_int_equal(jct_stat(b, "remote_hits"), 0);
}

/* Values changed in the share are rejected and counted; the request
 * compiles and is served NVRTC's bytes. */
static void test_tamper(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", "?read-only");
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	char writer[700];
	snprintf(writer, sizeof(writer), "file://%s", x->share);
	start(x, 0, writer);
	start(x, 1, NULL); /* read-only: the bad values stay as planted */
	char k0[33], k1[33], path[1024];
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(fetch(x, a, 1, k1), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2);
	value_path(x, k0, path, sizeof(path));
	size_t len;
	uint8_t *good = read_all(path, &len);
	int64_t n = 0, compiles = 0;

	/* 1. A flipped byte in the middle. */
	uint8_t *bad = malloc(len);
	memcpy(bad, good, len);
	bad[len / 2] ^= 0x20;
	plant(x, k0, bad, len);
	rejected(x, b, 0, &n, &compiles);
	/* 2. Truncated. */
	plant(x, k0, good, len - 9);
	rejected(x, b, 0, &n, &compiles);
	/* 3. Another key's (good, signed) value. */
	char p1[1024];
	value_path(x, k1, p1, sizeof(p1));
	size_t len1;
	uint8_t *other = read_all(p1, &len1);
	plant(x, k0, other, len1);
	rejected(x, b, 0, &n, &compiles);
	/* 4. Not a value at all. */
	plant(x, k0, "hello", 5);
	rejected(x, b, 0, &n, &compiles);
	/* 5. Not a regular file: a symbolic link to the good value, a directory. */
	char saved[1100];
	snprintf(saved, sizeof(saved), "%s.saved", path);
	jct_write_file(saved, good, len);
	unlink(path);
	assert_int_equal(symlink(saved, path), 0);
	rejected(x, b, 0, &n, &compiles);
	unlink(path);
	assert_int_equal(mkdir(path, 0755), 0);
	rejected(x, b, 0, &n, &compiles);
	rmdir(path);
	/* 7. Its directory DIR/XX a symbolic link to one holding the good value. */
	char sub[600], moved[700];
	snprintf(sub, sizeof(sub), "%s/%.2s", x->share, k0);
	snprintf(moved, sizeof(moved), "%s.moved", sub);
	plant(x, k0, good, len);
	assert_int_equal(rename(sub, moved), 0);
	assert_int_equal(symlink(moved, sub), 0);
	rejected(x, b, 0, &n, &compiles);
	unlink(sub);
	assert_int_equal(rename(moved, sub), 0);
	/* The good value again: served. */
	plant(x, k0, good, len);
	purge_all(b);
	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "remote_errors"), 0);
	char line[96];
	snprintf(line, sizeof(line), "key %s: value from", k0);
	assert_int_equal(jct_log_count(b, line), 1); /* logged once per key */
	/* The read-only daemon wrote nothing: no value of its compiles. */
	assert_int_equal(jct_stat(b, "remote_publishes"), 0);
	assert_int_equal(count_files(x, ".lock", 0), 0);
	free(bad);
	free(good);
	free(other);
	printf("tamper: %lld values rejected (flipped byte, truncated, other key, garbage, "
	       "symlink, directory, linked directory), each compiled; the good one served\n",
	       (long long)n);
}

/* A share that refuses writes: requests are served by compiling locally,
 * the failures counted, the tier stays up; its values are still read. */
static void test_full_and_read_only(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1,0:2", NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	x->mounted = mount("tmpfs", x->share, "tmpfs", 0, "size=48k,mode=0755") == 0;
	if (!x->mounted && geteuid() == 0) {
		printf("full share: cannot mount a tmpfs here (%s): skipped\n", strerror(errno));
		skip();
	}
	start(x, 0, NULL);
	start(x, 1, NULL);
	char k0[33];
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	int64_t errors = jct_stat(a, "remote_errors");
	if (x->mounted) {
		/* Full: fill what is left. */
		char filler[600];
		snprintf(filler, sizeof(filler), "%s/filler", x->share);
		jct_sh("dd if=/dev/zero of=%s bs=4k count=64 2>/dev/null", filler);
	} else {
		assert_int_equal(chmod(x->share, 0555), 0);
	}
	assert_int_equal(fetch(x, a, 1, NULL), JC_MISS); /* compiled and served */
	assert_int_equal(jct_stat(a, "compiles"), 2);
	assert_true(wait_stat(a, "remote_errors", errors + 1) > errors);
	assert_int_equal(jct_stat(a, "remote_publishes"), 1);
	assert_int_equal(count_files(x, ".v", 1), 1); /* no part of a value left behind */
	char *json = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(a, &json, NULL, args), 0);
	jct_assert_has(json, "\"remote_state\": \"up\"");
	free(json);
	/* The value already there is still served. */
	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT);
	if (x->mounted) {
		/* Read-only mount. */
		assert_int_equal(mount(NULL, x->share, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
		assert_int_equal(fetch(x, b, 2, NULL), JC_MISS);
		assert_int_equal(fetch(x, a, 0, NULL), JC_HIT);
		purge_all(a);
		assert_int_equal(fetch(x, a, 0, NULL), JC_REMOTE_HIT);
	}
	printf("%s share: compiles served locally, %lld write failures counted, tier up\n",
	       x->mounted ? "full (tmpfs), then read-only" : "mode 0555",
	       (long long)jct_stat(a, "remote_errors") - errors);
}

/* Daemons killed with SIGKILL 0 to 30 ms after answering a compile (while
 * they publish) leave only whole values: every value file decodes completely,
 * a temp file holding half a value is never read, and a fresh daemon is
 * served every kernel correctly. */
static void test_killed_writer(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1,0:2,0:3", NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	char keys[4][33];
	const useconds_t delay[4] = {0, 2000, 6000, 30000}; /* into the publish */
	for (int v = 0; v < 4; v++) {
		start(x, 0, NULL);
		assert_int_equal(fetch(x, a, v, keys[v]), JC_MISS);
		usleep(delay[v]);
		kill(a->pid, SIGKILL);
		jct_daemon_cleanup(a);
		jct_daemon_init(a);
	}
	int whole = count_files(x, ".v", 1); /* fails on any partial value */
	/* Half a value under a temp name, where a killed writer leaves it. */
	start(x, 2, NULL);
	char k3[33], path[1024], tmp[1200];
	for (int v = 0; v < 4; v++)
		fetch(x, &x->d[2], v, v == 3 ? k3 : NULL);
	value_path(x, k3, path, sizeof(path));
	for (double end = jtl_now_s() + 10; access(path, F_OK) != 0 && jtl_now_s() < end;)
		usleep(20000);
	size_t len;
	uint8_t *val = read_all(path, &len);
	unlink(path);
	snprintf(tmp, sizeof(tmp), "%s/%.2s/.tmp-%s.v-1234-deadbeef", x->share, k3, k3);
	jct_write_file(tmp, val, len / 2);
	free(val);
	start(x, 1, NULL);
	for (int v = 0; v < 3; v++)
		assert_int_equal(fetch(x, b, v, NULL), JC_REMOTE_HIT);
	assert_int_equal(fetch(x, b, 3, NULL), JC_MISS); /* the temp file is not a value */
	assert_int_equal(jct_stat(b, "remote_rejected"), 0);
	assert_int_equal(jct_stat(b, "compiles"), 1);
	printf("killed writers: %d whole values, none partial; a half value under a temp name "
	       "was never read\n",
	       whole);
}

/* A fleet lock whose holder stopped renewing it (older than lock-stale) is
 * taken over at once; a fresh one is waited for until it is stale. */
static void test_stale_lock(void **state)
{
	struct ffx *x = ffx_new(state, "0:0", "?lock-stale=5s");
	struct jtl_daemon *a = &x->d[0];
	const char *flags[] = {"--remote",
			       x->url,
			       "--remote-secret-file",
			       x->secret,
			       "--remote-lock-wait",
			       "30s",
			       "--log-level",
			       "info",
			       NULL};
	jct_daemon_start(a, flags);
	char k0[33], path[1024], lock[1024];
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	value_path(x, k0, path, sizeof(path));
	snprintf(lock, sizeof(lock), "%s/%.2s/%s.lock", x->share, k0, k0);
	/* A dead holder's lock, a minute old: taken over, compiled at once. */
	unlink(path);
	jct_write_text(lock, "deadhost:1:00000000");
	age(lock, 60);
	purge_all(a);
	double t0 = jtl_now_s();
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	double took = jtl_now_s() - t0;
	assert_true(took < 1.5);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2);
	assert_int_equal(access(lock, F_OK), -1); /* ours, released after the value */
	/* A peer's fresh lock: waited for until stale (5 s), then compiled. */
	unlink(path);
	jct_write_text(lock, "peerhost:1:00000000");
	purge_all(a);
	t0 = jtl_now_s();
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	double waited = jtl_now_s() - t0;
	assert_true(waited >= 3.5 && waited < 15); /* ages are whole seconds */
	printf("stale lock taken over in %.2f s; a fresh one waited for %.2f s (lock-stale 5s)\n",
	       took, waited);
}

/* Over max-size, the oldest values are removed. */
static void test_budget(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", NULL);
	struct jtl_daemon *a = &x->d[0];
	start(x, 0, NULL);
	char k0[33], k1[33], p0[1024], p1[1024], url[800];
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	value_path(x, k0, p0, sizeof(p0));
	struct stat st;
	assert_int_equal(stat(p0, &st), 0);
	age(p0, 3600);
	jct_daemon_cleanup(a);
	jct_daemon_init(a);
	/* Room for one value and a half: the second's put trims the first. */
	snprintf(url, sizeof(url), "%s?max-size=%lld", x->url, (long long)st.st_size * 3 / 2);
	start(x, 0, url);
	assert_int_equal(fetch(x, a, 1, k1), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	value_path(x, k1, p1, sizeof(p1));
	assert_true(jct_wait_log(a, "oldest values removed", 10000));
	assert_int_equal(access(p0, F_OK), -1);
	assert_int_equal(access(p1, F_OK), 0);
	printf("budget %lld bytes: the older value removed, the newer kept\n",
	       (long long)st.st_size * 3 / 2);
}

/*
 * Two tiers, in order (--remote given twice): W writes to both; R, whose
 * first tier is empty, misses there and is served from the second; a
 * daemon configured with the list in its configuration file does the same;
 * stats say 2 tiers and both URLs.
 */
static void test_two_tiers(void **state)
{
	struct ffx *x = ffx_new(state, "0:0", NULL);
	struct jtl_daemon *w = &x->d[0], *r = &x->d[1], *c = &x->d[2];
	char empty[500], url2[600], conf[500], text[2000];
	snprintf(empty, sizeof(empty), "%s/empty", x->fx->d.dir);
	assert_int_equal(mkdir(empty, 0755), 0);
	snprintf(url2, sizeof(url2), "file://%s?read-only", empty);
	const char *wflags[] = {"--remote", url2, "--remote", x->url, "--remote-secret-file",
				x->secret,  NULL};
	jct_daemon_start(w, wflags);
	char k0[33];
	assert_int_equal(fetch(x, w, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(w, "remote_publishes", 1), 1); /* the read-only one: none */
	assert_int_equal(jct_stat(w, "remote_tiers"), 2);
	assert_int_equal(count_files(x, ".v", 1), 1);

	char emptyurl[600];
	snprintf(emptyurl, sizeof(emptyurl), "file://%s", empty);
	const char *rflags[] = {"--remote", emptyurl, "--remote", x->url, "--remote-secret-file",
				x->secret,  NULL};
	jct_daemon_start(r, rflags);
	assert_int_equal(fetch(x, r, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(r, "compiles"), 0);
	assert_int_equal(jct_stat(r, "remote_hits"), 1);
	assert_int_equal(jct_stat(r, "remote_misses"), 0);
	char *json = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(r, &json, NULL, args), 0);
	char want[1400];
	snprintf(want, sizeof(want), "\"remote_url\": \"%s %s\"", emptyurl, x->url);
	jct_assert_has(json, want);
	free(json);

	/* The same list from a configuration file: one line per tier; a flag
	 * would replace the whole list. */
	snprintf(conf, sizeof(conf), "%s/jitcached.conf", x->fx->d.dir);
	snprintf(text, sizeof(text), "remote = %s\nremote = %s\nremote-secret-file = %s\n",
		 emptyurl, x->url, x->secret);
	jct_write_text(conf, text);
	const char *cflags[] = {"--config", conf, NULL};
	jct_daemon_start(c, cflags);
	assert_int_equal(fetch(x, c, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(c, "remote_tiers"), 2);
	printf("two tiers: a miss in the first, served from the second (flags and config file)\n");
}

/* A second share in the fixture's directory (made empty), its URL into url. */
static void second_share(const struct ffx *x, const char *name, char *dir, size_t dirlen, char *url,
			 size_t urllen)
{
	snprintf(dir, dirlen, "%s/%s", x->fx->d.dir, name);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(url, urllen, "file://%s", dir);
}

/* Starts d with the tiers urls (NULL-terminated, in order), signed, with
 * --remote-ttl ttl unless NULL. */
static void start_tiers(const struct ffx *x, struct jtl_daemon *d, const char *const *urls,
			const char *ttl)
{
	const char *flags[16];
	int n = 0;
	for (; *urls; urls++) {
		flags[n++] = "--remote";
		flags[n++] = *urls;
	}
	flags[n++] = "--remote-secret-file";
	flags[n++] = x->secret;
	flags[n++] = "--log-level";
	flags[n++] = "info";
	if (ttl) {
		flags[n++] = "--remote-ttl";
		flags[n++] = ttl;
	}
	flags[n] = NULL;
	jct_daemon_start(d, flags);
}

/* Bytes of the file at path. */
static int64_t file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return (int64_t)st.st_size;
}

/*
 * Promotion: a value found in a later tier is written to the earlier ones.
 * W publishes to the second share only; R (first, then second) misses in
 * the first, is served from the second, and writes the value to the first
 * (its fleet lock there released after it); C, on the first share alone,
 * is then served from it without compiling.
 */
static void test_promotion(void **state)
{
	struct ffx *x = ffx_new(state, "0:0", NULL);
	struct jtl_daemon *w = &x->d[0], *r = &x->d[1], *c = &x->d[2];
	char first[500], url1[600], k0[33], p2[1024], p1[1024];
	second_share(x, "first", first, sizeof(first), url1, sizeof(url1));
	start(x, 0, NULL);
	assert_int_equal(fetch(x, w, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(w, "remote_publishes", 1), 1);
	value_path(x, k0, p2, sizeof(p2));
	int64_t size = file_size(p2);

	const char *both[] = {url1, x->url, NULL};
	start_tiers(x, r, both, NULL);
	assert_int_equal(fetch(x, r, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(wait_stat(r, "remote_publishes", 1), 1); /* the promotion */
	snprintf(p1, sizeof(p1), "%s/%.2s/%s.v", first, k0, k0);
	assert_int_equal(access(p1, F_OK), 0);
	assert_int_equal(count_files_in(first, ".v", 1), 1); /* whole, signed, key k0 */
	assert_int_equal(count_files_in(first, ".lock", 0), 0);
	assert_int_equal(jct_stat(r, "compiles"), 0);
	assert_int_equal(jct_stat(r, "remote_hits"), 1);
	assert_int_equal(jct_stat(r, "remote_misses"), 0);
	assert_int_equal(jct_stat(r, "remote_bytes_in"), size);
	assert_int_equal(jct_stat(r, "remote_bytes_out"), size);
	assert_true(jct_log_count(r, "written to 1 tier(s) before it") == 1);

	const char *one[] = {url1, NULL};
	start_tiers(x, c, one, NULL);
	assert_int_equal(fetch(x, c, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(c, "compiles"), 0);
	printf("promotion: served from the second tier, written to the first (%lld bytes); a "
	       "daemon on the first alone then compiled 0\n",
	       (long long)size);
}

/*
 * The remote_* counters with two tiers count the stack, not each tier
 * apart: a compile after a miss in both is one miss and a publish to each
 * (bytes_out: twice the value); a value rejected in the first tier and
 * found in the second is one rejection and one hit, and the good value
 * replaces the bad one in the first (promotion). A first tier that is not
 * there sets the stack's state (the worst tier's) and last error while
 * the second serves.
 */
static void test_two_tier_stats(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", NULL);
	struct jtl_daemon *w = &x->d[0], *r = &x->d[1], *m = &x->d[2];
	char first[500], url1[600], k0[33], p1[1024], p2[1024];
	second_share(x, "first", first, sizeof(first), url1, sizeof(url1));
	const char *both[] = {url1, x->url, NULL};
	start_tiers(x, w, both, NULL);
	assert_int_equal(fetch(x, w, 0, k0), JC_MISS);
	assert_int_equal(wait_stat(w, "remote_publishes", 2), 2);
	snprintf(p1, sizeof(p1), "%s/%.2s/%s.v", first, k0, k0);
	value_path(x, k0, p2, sizeof(p2));
	int64_t size = file_size(p2);
	assert_int_equal(file_size(p1), size);
	assert_int_equal(jct_stat(w, "remote_misses"), 1);
	assert_int_equal(jct_stat(w, "remote_hits"), 0);
	assert_int_equal(jct_stat(w, "remote_bytes_out"), 2 * size);
	assert_int_equal(jct_stat(w, "remote_errors"), 0);
	assert_int_equal(count_files_in(first, ".lock", 0) + count_files(x, ".lock", 0), 0);

	/* A bad value in the first tier, the good one in the second. */
	plant_file(p1, "garbage", 7);
	start_tiers(x, r, both, NULL);
	assert_int_equal(fetch(x, r, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(r, "remote_rejected"), 1);
	assert_int_equal(jct_stat(r, "remote_hits"), 1);
	assert_int_equal(jct_stat(r, "remote_misses"), 0);
	assert_int_equal(jct_stat(r, "remote_bytes_in"), 7 + size);
	assert_int_equal(wait_stat(r, "remote_publishes", 1), 1);
	assert_int_equal(jct_stat(r, "remote_bytes_out"), size);
	assert_int_equal(count_files_in(first, ".v", 1), 1); /* repaired */
	assert_int_equal(jct_stat(r, "compiles"), 0);

	/* A first tier that is not there: the stack's state and last error are
	 * its, the second serves. */
	char gone[600];
	snprintf(gone, sizeof(gone), "file://%s/not-mounted", x->fx->d.dir);
	const char *missing[] = {gone, x->url, NULL};
	start_tiers(x, m, missing, NULL);
	assert_int_equal(fetch(x, m, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(fetch(x, m, 1, NULL), JC_MISS);
	assert_int_equal(jct_stat(m, "remote_hits"), 1);
	assert_int_equal(jct_stat(m, "remote_misses"), 1);
	assert_true(wait_stat(m, "remote_publishes", 1) >= 1); /* the second only */
	assert_true(jct_stat(m, "remote_errors") >= 2);
	char *json = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(m, &json, NULL, args), 0);
	assert_null(strstr(json, "\"remote_state\": \"up\""));
	jct_assert_has(json, "\"remote_tiers\": 2");
	/* each tier's state in order; the last error names its tier */
	assert_true(strstr(json, "\"remote_tier_states\": \"down up\"") ||
		    strstr(json, "\"remote_tier_states\": \"degraded up\""));
	char want[800];
	snprintf(want, sizeof(want), "\"remote_last_error\": \"%s: ", gone);
	jct_assert_has(json, want);
	free(json);
	printf("two tiers: 1 miss and 2 publishes (%lld bytes out) for one compile; a rejected "
	       "value in the first and a hit in the second, the first repaired; a missing first "
	       "tier reported while the second served\n",
	       (long long)2 * size);
}

/*
 * --remote-ttl on a share: a value whose file is older than the TTL is
 * not served (the request compiles, and its publish writes it afresh),
 * and the trim removes the others that old; a younger one is served.
 */
static void test_ttl(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1], *c = &x->d[2];
	const char *share[] = {x->url, NULL};
	char k0[33], k1[33], p0[1024], p1[1024];
	start_tiers(x, a, share, "1h");
	assert_int_equal(fetch(x, a, 0, k0), JC_MISS);
	assert_int_equal(fetch(x, a, 1, k1), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2);
	value_path(x, k0, p0, sizeof(p0));
	value_path(x, k1, p1, sizeof(p1));
	age(p0, 7200);
	age(p1, 7200);
	start_tiers(x, b, share, "1h");
	assert_int_equal(fetch(x, b, 0, NULL), JC_MISS); /* past the TTL: not served */
	assert_int_equal(jct_stat(b, "compiles"), 1);
	assert_int_equal(jct_stat(b, "remote_misses"), 1);
	assert_int_equal(jct_stat(b, "remote_hits"), 0);
	assert_int_equal(jct_stat(b, "remote_rejected"), 0);
	assert_int_equal(wait_stat(b, "remote_publishes", 1), 1);
	assert_true(jct_wait_log(b, "values past remote-ttl removed", 10000));
	assert_int_equal(access(p1, F_OK), -1); /* trimmed */
	struct stat st;
	assert_int_equal(stat(p0, &st), 0); /* written afresh */
	assert_true(time(NULL) - st.st_mtime < 600);
	start_tiers(x, c, share, "1h");
	assert_int_equal(fetch(x, c, 0, NULL), JC_REMOTE_HIT);
	printf("remote-ttl 1h on a share: a 2 h old value not served (compiled and written "
	       "afresh), another trimmed; the fresh one served\n");
}

/* A share that is not there (not mounted): requests compile and are
 * served, the failures move the tier out of "up"; once it is there, values
 * are written again. */
static void test_share_missing(void **state)
{
	struct ffx *x = ffx_new(state, "0:0,0:1", NULL);
	struct jtl_daemon *a = &x->d[0];
	char url[700], dir[500];
	snprintf(dir, sizeof(dir), "%s/not-mounted", x->fx->d.dir);
	snprintf(url, sizeof(url), "file://%s", dir);
	start(x, 0, url);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_true(wait_stat(a, "remote_errors", 2) >= 2); /* the get, the put */
	char *json = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(a, &json, NULL, args), 0);
	assert_null(strstr(json, "\"remote_state\": \"up\"")); /* degraded or down */
	free(json);
	assert_int_equal(jct_stat(a, "remote_publishes"), 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	int up = 0; /* a probe finds it (down: after a back-off of 250 ms to 5 s) */
	for (double end = jtl_now_s() + 15; !up && jtl_now_s() < end; usleep(100000)) {
		assert_int_equal(jct_ctl(a, &json, NULL, args), 0);
		up = strstr(json, "\"remote_state\": \"up\"") != NULL;
		free(json);
	}
	assert_true(up);
	assert_int_equal(fetch(x, a, 1, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	printf("share not there: compiled and served, %lld errors, the tier not up; then up "
	       "and published once it was there\n",
	       (long long)jct_stat(a, "remote_errors"));
}

/* Bad file:// URLs are refused at start-up. */
static void test_bad_url(void **state)
{
	struct ffx *x = ffx_new(state, NULL, NULL);
	const char *bad[] = {"file://relative/dir", "file:///tmp/x?max-size=0",
			     "file:///tmp/x?lock-stale=nope", "file:///tmp/x?colour=blue"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(jct_sh("%s --remote '%s' --remote-unsigned --cache-dir %s/c "
					"--socket %s/s >/dev/null 2>&1",
					x->d[0].bin, bad[i], x->fx->d.dir, x->fx->d.dir),
				 2);
}

int main(int argc, char **argv)
{
	if (argc == 10 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "client") == 0)
		return jct_helper_client(argv + 3);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_two_daemons, ffx_free),
	    cmocka_unit_test_teardown(test_tamper, ffx_free),
	    cmocka_unit_test_teardown(test_full_and_read_only, ffx_free),
	    cmocka_unit_test_teardown(test_killed_writer, ffx_free),
	    cmocka_unit_test_teardown(test_stale_lock, ffx_free),
	    cmocka_unit_test_teardown(test_budget, ffx_free),
	    cmocka_unit_test_teardown(test_two_tiers, ffx_free),
	    cmocka_unit_test_teardown(test_promotion, ffx_free),
	    cmocka_unit_test_teardown(test_two_tier_stats, ffx_free),
	    cmocka_unit_test_teardown(test_ttl, ffx_free),
	    cmocka_unit_test_teardown(test_share_missing, ffx_free),
	    cmocka_unit_test_teardown(test_bad_url, ffx_free),
	};
	if (getenv("JCT_TEST_FILTER"))
		cmocka_set_test_filter(getenv("JCT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
