/* SPDX-License-Identifier: MIT */
/*
 * `jitcachectl stats` against a real daemon after real compiles: the JSON
 * keys docs/ARCHITECTURE.md ("Interfaces") promises and their values, the
 * human table, the Prometheus text format checked by a strict parser written
 * here (and by promtool when it is installed), stats --zero through the
 * daemon and offline, counters that persist across restarts, and
 * jc_client_stats() (the public API).
 */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nvJitLink.h>
#include <nvrtc.h>
#include <cmocka.h>

#include "tests/lib/test.h"

#include "core/index.h"

/* A miss, two hits, a compile failure and its negative hit. */
static void workload(struct jtl_daemon *d)
{
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_HIT);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_HIT);
	assert_int_equal(jct_compile_failure(d, NULL), JC_MISS);
	assert_int_equal(jct_compile_failure(d, NULL), JC_NEGATIVE_HIT);
}

static const char *json_str(const char *json, const char *name, char *buf, size_t len)
{
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\": \"", name);
	const char *p = strstr(json, pat);
	assert_non_null(p);
	p += strlen(pat);
	const char *end = strchr(p, '"');
	assert_non_null(end);
	snprintf(buf, len, "%.*s", (int)(end - p), p);
	return buf;
}

static void test_json_and_human(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	workload(d);
	const char *args[] = {"stats", "--json", NULL};
	char *json = jct_ctl_expect(d, 0, NULL, args);
	static const struct {
		const char *key;
		int64_t want;
	} exact[] = {
	    {"hits", 2},
	    {"misses", 2},
	    {"compiles", 2},
	    {"compile_failures", 1},
	    {"negative_hits", 1},
	    {"single_flight_joins", 0},
	    {"entries", 1},
	    {"negative_entries", 1},
	    {"evictions", 0},
	    {"corrupt_objects", 0},
	    {"worker_crashes", 0},
	    {"hit_latency_samples", 2},
	    {"max_size", 10ll << 30},
	};
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
		if (jct_json_int(json, exact[i].key) != exact[i].want)
			fprintf(stderr, "%s: %lld, want %lld\n", exact[i].key,
				(long long)jct_json_int(json, exact[i].key),
				(long long)exact[i].want);
		assert_int_equal(jct_json_int(json, exact[i].key), exact[i].want);
	}
	assert_true(jct_json_int(json, "bytes") > 0);
	assert_true(jct_json_int(json, "uptime_s") >= 0);
	assert_int_equal(jct_json_int(json, "daemon_pid"), d->pid);
	int64_t p50 = jct_json_int(json, "hit_p50_us"), p99 = jct_json_int(json, "hit_p99_us");
	assert_true(p50 > 0 && p50 < 1000000);
	assert_true(p99 >= p50);
	assert_true(jct_json_int(json, "compile_ns") > 0);

	/* Versions: the daemon's NVRTC and nvJitLink are the ones linked here. */
	int major, minor;
	char buf[64], want[32];
	assert_int_equal(nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
	snprintf(want, sizeof(want), "%d.%d", major, minor);
	assert_string_equal(json_str(json, "nvrtc_version", buf, sizeof(buf)), want);
	unsigned jmajor, jminor;
	assert_int_equal(nvJitLinkVersion(&jmajor, &jminor), NVJITLINK_SUCCESS);
	snprintf(want, sizeof(want), "%u.%u", jmajor, jminor);
	assert_string_equal(json_str(json, "nvjitlink_version", buf, sizeof(buf)), want);
	json_str(json, "driver_version", buf, sizeof(buf));
	assert_true(buf[0] != '\0');
	free(json);

	/* The human table: 5 requests, 2 hits + 1 negative hit = 60 %. */
	const char *human[] = {"stats", NULL};
	char *out = jct_ctl_expect(d, 0, NULL, human);
	static const char *const lines[] = {
	    "Requests:                          5\n",
	    "  Hits:                            2   40.00 %\n",
	    "  Negative hits:                   1   20.00 %\n",
	    "  Misses:                          2   40.00 %\n",
	    "Hit ratio:                            60.00 %\n",
	    "Compiles:                          2\n",
	    "  Failures:                        1\n",
	    "Entries:                           1  (+ 1 negative)\n",
	    "Evictions:                         0\n",
	    "  Eviction:               above 10.0 GiB, down to 9.0 GiB",
	    "Mean compile time:",
	    "Hit latency (daemon):     p50 ",
	    "(2 hits since ",
	    "Versions:                 jitcache ",
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (!strstr(out, lines[i]))
			fprintf(stderr, "no '%s' in:\n%s", lines[i], out);
		assert_non_null(strstr(out, lines[i]));
	}
	snprintf(want, sizeof(want), "NVRTC %d.%d, nvJitLink %u.%u", major, minor, jmajor, jminor);
	assert_non_null(strstr(out, want));
	free(out);
}

/* --- a strict parser of the Prometheus text exposition format 0.0.4 ---------- */

struct family {
	char name[128], type[16];
	int help, samples, closed;
};

struct prom {
	struct family fam[128];
	size_t n;
	int last;	     /* family of the previous sample, -1 */
	char seen[256][512]; /* name{labels} of every sample: no duplicates */
	size_t n_seen;
};

static int metric_name_ok(const char *s, size_t len)
{
	if (!len || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	for (size_t i = 1; i < len; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return 0;
	return 1;
}

static struct family *family(struct prom *p, const char *name, size_t len)
{
	for (size_t i = 0; i < p->n; i++)
		if (strlen(p->fam[i].name) == len && memcmp(p->fam[i].name, name, len) == 0)
			return &p->fam[i];
	assert_true(p->n < 128);
	struct family *f = &p->fam[p->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%.*s", (int)len, name);
	return f;
}

/* The family a sample name belongs to (summary: _sum and _count too). */
static struct family *sample_family(struct prom *p, const char *name, size_t len)
{
	static const char *const sfx[] = {"_sum", "_count"};
	for (size_t i = 0; i < 2; i++) {
		size_t l = strlen(sfx[i]);
		if (len > l && memcmp(name + len - l, sfx[i], l) == 0) {
			for (size_t k = 0; k < p->n; k++)
				if (strcmp(p->fam[k].type, "summary") == 0 &&
				    strlen(p->fam[k].name) == len - l &&
				    memcmp(p->fam[k].name, name, len - l) == 0)
					return &p->fam[k];
		}
	}
	return family(p, name, len);
}

/* Parses a sample value: a float, NaN, +Inf or -Inf, then the end of line. */
static double sample_value(const char *s)
{
	if (strcmp(s, "NaN") == 0)
		return NAN;
	if (strcmp(s, "+Inf") == 0)
		return INFINITY;
	if (strcmp(s, "-Inf") == 0)
		return -INFINITY;
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end) {
		fprintf(stderr, "bad sample value '%s'\n", s);
		fail();
	}
	return v;
}

/* Checks one sample line; returns its value and writes name{labels} to key. */
static double parse_sample(struct prom *p, const char *line, char *key, size_t keylen,
			   double *quantile)
{
	const char *s = line;
	while (*s && *s != '{' && *s != ' ')
		s++;
	size_t nlen = (size_t)(s - line);
	assert_true(metric_name_ok(line, nlen));
	*quantile = -1;
	size_t k = (size_t)snprintf(key, keylen, "%.*s", (int)nlen, line);
	if (*s == '{') {
		s++;
		while (*s != '}') {
			const char *ln = s;
			while (isalnum((unsigned char)*s) || *s == '_')
				s++;
			int lname_len = (int)(s - ln);
			assert_true(lname_len > 0 && !isdigit((unsigned char)*ln));
			assert_int_equal(*s, '=');
			assert_int_equal(s[1], '"');
			int is_quantile = lname_len == 8 && memcmp(ln, "quantile", 8) == 0;
			s += 2;
			char val[256];
			size_t vn = 0;
			while (*s != '"') {
				assert_true(*s && *s != '\n');
				if (*s == '\\') {
					s++;
					assert_true(*s == '\\' || *s == '"' || *s == 'n');
				}
				assert_true(vn < sizeof(val) - 1);
				val[vn++] = *s++;
			}
			val[vn] = '\0';
			s++;
			if (is_quantile) {
				char *end;
				*quantile = strtod(val, &end);
				assert_true(*end == '\0' && *quantile >= 0 && *quantile <= 1);
			}
			k += (size_t)snprintf(key + k, keylen - k, "%.*s=%s,", lname_len, ln, val);
			if (*s == ',')
				s++;
			else
				assert_int_equal(*s, '}');
		}
		s++;
	}
	assert_int_equal(*s, ' ');
	struct family *f = sample_family(p, line, nlen);
	int idx = (int)(f - p->fam);
	/* TYPE comes before the samples; a family's samples are contiguous. */
	assert_true(f->type[0] != '\0');
	assert_false(f->closed);
	if (p->last >= 0 && p->last != idx)
		p->fam[p->last].closed = 1;
	p->last = idx;
	f->samples++;
	return sample_value(s + 1);
}

/* Parses text; every family must be jitcache_*, with HELP and TYPE; fails
 * the test on any deviation. Calls back for each sample. */
static void prom_parse(char *text, struct prom *p,
		       void (*cb)(const char *key, double v, double quantile, void *ctx), void *ctx)
{
	memset(p, 0, sizeof(*p));
	p->last = -1;
	size_t len = strlen(text);
	assert_true(len > 0 && text[len - 1] == '\n');
	for (char *line = text, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		*nl = '\0';
		assert_true(line[0] != '\0'); /* no empty lines */
		if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
			const char *name = line + 7, *sp = strchr(name, ' ');
			assert_non_null(sp);
			assert_true(metric_name_ok(name, (size_t)(sp - name)));
			struct family *f = family(p, name, (size_t)(sp - name));
			assert_int_equal(f->samples, 0); /* before the samples */
			if (line[2] == 'H') {
				assert_false(f->help);
				f->help = 1;
				assert_true(sp[1] != '\0');
			} else {
				assert_true(f->type[0] == '\0');
				snprintf(f->type, sizeof(f->type), "%s", sp + 1);
				assert_true(strcmp(f->type, "counter") == 0 ||
					    strcmp(f->type, "gauge") == 0 ||
					    strcmp(f->type, "summary") == 0);
			}
			continue;
		}
		assert_true(line[0] != '#'); /* no other comments from us */
		char key[512];
		double q;
		double v = parse_sample(p, line, key, sizeof(key), &q);
		for (size_t i = 0; i < p->n_seen; i++)
			assert_string_not_equal(p->seen[i], key);
		assert_true(p->n_seen < 256);
		snprintf(p->seen[p->n_seen++], sizeof(p->seen[0]), "%s", key);
		cb(key, v, q, ctx);
	}
	for (size_t i = 0; i < p->n; i++) {
		struct family *f = &p->fam[i];
		size_t l = strlen(f->name);
		assert_true(strncmp(f->name, "jitcache_", 9) == 0);
		assert_true(f->help && f->type[0] && f->samples > 0);
		if (strcmp(f->type, "counter") == 0)
			assert_true(l > 6 && strcmp(f->name + l - 6, "_total") == 0);
	}
}

struct expect {
	const char *json;
	int up, checked;
};

static void check_sample(const char *key, double v, double q, void *ctx)
{
	struct expect *e = ctx;
	static const char *const pairs[][2] = {
	    {"jitcache_hits_total", "hits"},
	    {"jitcache_misses_total", "misses"},
	    {"jitcache_negative_hits_total", "negative_hits"},
	    {"jitcache_single_flight_joins_total", "single_flight_joins"},
	    {"jitcache_compiles_total", "compiles"},
	    {"jitcache_compile_failures_total", "compile_failures"},
	    {"jitcache_evictions_total", "evictions"},
	    {"jitcache_entries", "entries"},
	    {"jitcache_negative_entries", "negative_entries"},
	    {"jitcache_bytes", "bytes"},
	    {"jitcache_max_size_bytes", "max_size"},
	    {"jitcache_hit_duration_seconds_count", "hit_latency_samples"},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		if (strcmp(key, pairs[i][0]) == 0) {
			assert_true(v == (double)jct_json_int(e->json, pairs[i][1]));
			e->checked++;
		}
	if (strcmp(key, "jitcache_compile_seconds_total") == 0) {
		assert_true(fabs(v - jct_json_int(e->json, "compile_ns") / 1e9) < 1e-6);
		e->checked++;
	}
	if (strcmp(key, "jitcache_up") == 0)
		assert_true(v == e->up);
	if (q == 0.5 && strstr(key, "jitcache_hit_duration_seconds") == key) {
		assert_true(fabs(v - jct_json_int(e->json, "hit_p50_us") / 1e6) < 1e-9);
		e->checked++;
	}
	if (strstr(key, "jitcache_build_info") == key)
		assert_true(v == 1 && strstr(key, "nvrtc=") && strstr(key, "driver="));
}

/* stats --prometheus and stats --json of the same state (nothing changes between). */
static void check_prometheus(const struct jtl_daemon *d, int up, int want_checked)
{
	const char *pargs[] = {"stats", "--prometheus", NULL}, *jargs[] = {"stats", "--json", NULL};
	char *text = jct_ctl_expect(d, 0, NULL, pargs);
	char *json = jct_ctl_expect(d, 0, NULL, jargs);
	struct expect e = {.json = json, .up = up};
	struct prom *p = calloc(1, sizeof(*p));
	char *copy = strdup(text);
	prom_parse(copy, p, check_sample, &e);
	assert_int_equal(e.checked, want_checked);
	/* promtool, where installed, must agree (lint included). */
	char path[400], cmd[600];
	snprintf(path, sizeof(path), "%s/metrics.prom", d->dir);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "command -v promtool >/dev/null 2>&1 || exit 77; promtool check metrics < %s",
		 path);
	int rc = system(cmd);
	if (WEXITSTATUS(rc) != 77)
		assert_int_equal(WEXITSTATUS(rc), 0);
	free(p);
	free(copy);
	free(text);
	free(json);
}

static void test_prometheus_parses(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	workload(d);
	check_prometheus(d, 1, 14);
	/* Offline: read from the directory, no uptime nor latency. */
	assert_int_equal(jtl_daemon_stop(d), 0);
	check_prometheus(d, 0, 12);
}

static void test_zero_and_persistence(void **state)
{
	struct jtl_daemon *d = *state;
	const char *flags[] = {"--max-size", "123M", NULL};
	jct_daemon_start(d, flags);
	workload(d);
	sleep(1);
	int64_t up = jct_stat(d, "uptime_s");
	assert_true(up >= 1);
	const char *zero[] = {"stats", "--zero", NULL};
	free(jct_ctl_expect(d, 0, NULL, zero));
	const char *args[] = {"stats", "--json", NULL};
	char *json = jct_ctl_expect(d, 0, NULL, args);
	static const char *const zeroed[] = {"hits",
					     "misses",
					     "compiles",
					     "compile_failures",
					     "negative_hits",
					     "compile_ns",
					     "hit_latency_samples",
					     "hit_p50_us"};
	for (size_t i = 0; i < sizeof(zeroed) / sizeof(zeroed[0]); i++)
		assert_int_equal(jct_json_int(json, zeroed[i]), 0);
	assert_int_equal(jct_json_int(json, "entries"), 1); /* the cache itself stays */
	assert_int_equal(jct_json_int(json, "negative_entries"), 1);
	assert_true(jct_json_int(json, "uptime_s") >= up); /* uptime is not a counter */
	free(json);

	/* Counted again, and kept across a restart. */
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_HIT);
	assert_int_equal(jct_stat(d, "hits"), 1);
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, flags);
	assert_int_equal(jct_stat(d, "hits"), 1);
	assert_int_equal(jct_stat(d, "hit_latency_samples"), 0); /* not persisted: since start */
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_HIT);
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* Offline: the stored counters and the budget the daemon ran with. */
	json = jct_ctl_expect(d, 0, NULL, args);
	assert_int_equal(jct_json_int(json, "hits"), 2);
	assert_int_equal(jct_json_int(json, "uptime_s"), -1);
	assert_int_equal(jct_json_int(json, "max_size"), 123ll << 20);
	free(json);
	const char *human[] = {"stats", NULL};
	char *out = jct_ctl_expect(d, 0, NULL, human);
	assert_non_null(strstr(out, "none running"));
	assert_non_null(strstr(out, "of 123.0 MiB"));
	free(out);
	free(jct_ctl_expect(d, 0, NULL, zero));
	assert_int_equal(jct_stat(d, "hits"), 0);
	jct_daemon_start(d, flags);
	assert_int_equal(jct_stat(d, "hits"), 0);
	assert_int_equal(jct_stat(d, "entries"), 1);
}

/* Counters are u64 and are printed as such, past INT64_MAX too. */
static void test_u64_counters(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jtl_daemon_stop(d), 0);
	char path[512], err[256];
	struct jc_index *ix = NULL;
	snprintf(path, sizeof(path), "%s/index.sqlite", d->cache);
	assert_int_equal(jc__index_open(path, 0, &ix, err, sizeof(err)), 0);
	static const char *const names[] = {"hits", "compile_ns"};
	const uint64_t values[] = {(1ull << 63) + 5, UINT64_MAX};
	assert_int_equal(jc__index_counters_save(ix, names, values, 2), 0);
	jc__index_close(ix);
	for (int daemon = 0; daemon < 2; daemon++) {
		if (daemon)
			jct_daemon_start(d, NULL);
		const char *json_args[] = {"stats", "--json", NULL},
			   *prom_args[] = {"stats", "--prometheus", NULL};
		char *json = jct_ctl_expect(d, 0, NULL, json_args),
		     *prom = jct_ctl_expect(d, 0, NULL, prom_args);
		assert_non_null(strstr(json, "\"hits\": 9223372036854775813"));
		assert_non_null(strstr(json, "\"compile_ns\": 18446744073709551615"));
		assert_non_null(strstr(prom, "\njitcache_hits_total 9223372036854775813\n"));
		free(json);
		free(prom);
	}
}

/* jc_client_stats: the same values as stats --json, through the public API. */
static void test_client_stats_api(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	workload(d);
	const char *args[] = {"stats", "--json", NULL};
	char *json = jct_ctl_expect(d, 0, NULL, args);
	jc_client *c = jct_connect(d);
	jc_stats *s = NULL;
	assert_int_equal(jc_client_stats(c, &s), 0);
	size_t n = jc_stats_count(s), ints = 0, strs = 0;
	assert_true(n >= 20);
	for (size_t i = 0; i < n; i++) {
		const char *name, *str;
		int64_t num;
		assert_int_equal(jc_stats_at(s, i, &name, &num, &str), 0);
		char buf[1024]; /* the identity string holds the driver's whole build line */
		if (!str) {
			ints++;
			if (strcmp(name, "uptime_s") != 0 && strstr(name, "_us") == NULL &&
			    strcmp(name, "disk_free_bytes") != 0 &&
			    strcmp(name, "overhead_bytes") != 0)
				assert_int_equal(num, jct_json_int(json, name));
		} else {
			strs++;
			assert_int_equal(num, 0);
			assert_string_equal(str, json_str(json, name, buf, sizeof(buf)));
		}
	}
	assert_true(ints > 0 && strs > 0);
	const char *name, *str;
	int64_t num;
	assert_int_equal(jc_stats_at(s, n, &name, &num, &str), JC_EINVAL);
	assert_int_equal(jc_stats_at(NULL, 0, &name, &num, &str), JC_EINVAL);
	assert_int_equal(jc_stats_count(NULL), 0);
	jc_stats_free(s);
	jc_stats_free(NULL);
	assert_int_equal(jc_client_stats(NULL, &s), JC_EINVAL);
	assert_null(s);
	assert_int_equal(jc_client_stats(c, NULL), JC_EINVAL);
	/* The daemon gone: a transport error, nothing returned. */
	assert_int_equal(jtl_daemon_stop(d), 0);
	s = (jc_stats *)1;
	assert_true(jc_client_stats(c, &s) < 0);
	assert_null(s);
	assert_true(strlen(jc_client_errmsg(c)) > 0);
	jc_client_close(c);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_json_and_human, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_prometheus_parses, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_zero_and_persistence, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_u64_counters, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_client_stats_api, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
