/* SPDX-License-Identifier: MIT */
/* jitcachectl's admin commands (stats, ls, show, purge, verify, gc, ping,
 * version) and how their replies are printed (ctl.h). */
#include "client/ctl.h"

#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/includes.h"
#include "common/log.h"
#include "common/util.h"
#include "core/evict.h"

static void json_record(FILE *f, const struct jc_record *r)
{
	fputc('{', f);
	for (size_t i = 0; i < r->n; i++) {
		if (i)
			fputs(", ", f);
		jc__json_str(f, r->kv[i].name);
		fputs(": ", f);
		if (r->kv[i].is_unsigned)
			fprintf(f, "%" PRIu64, r->kv[i].u);
		else if (r->kv[i].is_int)
			fprintf(f, "%" PRId64, r->kv[i].i);
		else
			jc__json_str(f, r->kv[i].s);
	}
	fputc('}', f);
}

int64_t jc__ctl_geti(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return kv && kv->is_int ? kv->i : 0;
}

/* A counter or size (sent unsigned; an older daemon sends it signed). */
uint64_t jc__ctl_getu(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return !kv || !kv->is_int ? 0 : kv->is_unsigned ? kv->u : (uint64_t)kv->i;
}

const char *jc__ctl_gets(const struct jc_record *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(r, name);
	return kv && !kv->is_int ? kv->s : "";
}

/* A "users" field (uids, comma-separated) as names: "alice, bob, (1234)"
 * (a uid without a name in parentheses), then a newline. */
static void print_users(const char *uids)
{
	const char *p = uids;
	while (*p) {
		char *end;
		unsigned long uid = strtoul(p, &end, 10);
		if (end == p)
			break;
		struct passwd *pw = getpwuid((uid_t)uid);
		printf("%s", p == uids ? "" : ", ");
		if (pw)
			jc__escape_fputs(pw->pw_name, stdout);
		else
			printf("(%lu)", uid);
		p = *end == ',' ? end + 1 : end;
	}
	putchar('\n');
}

/* Local time of a unix time, "YYYY-MM-DD HH:MM:SS" (static buffer). */
static const char *when(int64_t unix_s)
{
	static char buf[32];
	time_t t = (time_t)unix_s;
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, sizeof(buf), "%" PRId64, unix_s);
	return buf;
}

static void human_bytes(char *buf, size_t len, double b)
{
	const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (b >= 1024 && u < 4)
		b /= 1024, u++;
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

static double pct(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

/* The remote tier's lines of `stats` (none when it is off or offline). */
static void print_remote(const struct jc_record *r)
{
	const char *state = jc__ctl_gets(r, "remote_state");
	if (!*state || strcmp(state, "off") == 0)
		return;
	char in[32], out[32];
	human_bytes(in, sizeof(in), (double)jc__ctl_getu(r, "remote_bytes_in"));
	human_bytes(out, sizeof(out), (double)jc__ctl_getu(r, "remote_bytes_out"));
	printf("Remote tier:              %s, %s%s%s\n", jc__ctl_gets(r, "remote_url"), state,
	       jc__ctl_geti(r, "remote_read_only") ? ", read-only" : "",
	       jc__ctl_geti(r, "remote_unsigned") ? ", UNSIGNED values (--remote-unsigned)"
						  : ", signed values");
	printf("  Hits:                   %10" PRIu64 "\n", jc__ctl_getu(r, "remote_hits"));
	printf("  Misses:                 %10" PRIu64 "\n", jc__ctl_getu(r, "remote_misses"));
	printf("  Publishes:              %10" PRIu64 "\n", jc__ctl_getu(r, "remote_publishes"));
	printf("  Rejected values:        %10" PRIu64 "\n", jc__ctl_getu(r, "remote_rejected"));
	printf("  Errors:                 %10" PRIu64 "%s%s\n", jc__ctl_getu(r, "remote_errors"),
	       *jc__ctl_gets(r, "remote_last_error") ? "  last: " : "",
	       jc__ctl_gets(r, "remote_last_error"));
	printf("  Bytes in / out:         %s / %s\n", in, out);
	if (jc__ctl_geti(r, "remote_latency_samples") > 0)
		printf("  Hit latency:            p50 %" PRId64 " us, p99 %" PRId64
		       " us (fetch + verify)\n",
		       jc__ctl_geti(r, "remote_p50_us"), jc__ctl_geti(r, "remote_p99_us"));
}

/* stats as a uid other than the admins' sees it: its own entries. */
static void print_stats_own(const struct jc_record *r)
{
	char used[32], share[32];
	uint64_t max = jc__ctl_getu(r, "user_max_size");
	human_bytes(used, sizeof(used), (double)jc__ctl_getu(r, "stored_bytes"));
	human_bytes(share, sizeof(share), (double)max);
	printf("Entries of %-15s %10" PRIu64 "\n", jc__ctl_gets(r, "scope"),
	       jc__ctl_getu(r, "entries"));
	printf("  Negative entries:       %10" PRIu64 "\n", jc__ctl_getu(r, "negative_entries"));
	printf("  Hits on them:           %10" PRIu64 "\n", jc__ctl_getu(r, "hits"));
	printf("  Bytes:                  %s%s%s%s\n", used, max ? " of a share of " : "",
	       max ? share : "", max ? " (--user-max-size)" : "");
	printf("Daemon:                   pid %" PRId64 "; counters over all users are for its "
	       "admins\n",
	       jc__ctl_geti(r, "daemon_pid"));
	printf("Versions:                 jitcache %s, NVRTC %s, nvJitLink %s, driver %s\n",
	       jc__ctl_gets(r, "version"), jc__ctl_gets(r, "nvrtc_version"),
	       jc__ctl_gets(r, "nvjitlink_version"), jc__ctl_gets(r, "driver_version"));
}

/* stats --by-user: one line per uid, with its user name where the user
 * database has one ("-" otherwise). */
static void print_by_user(const struct jc_admin_reply *reply)
{
	printf("%10s  %-16s  %10s  %10s  %14s  %14s  %10s  %s\n", "UID", "USER", "ENTRIES",
	       "NEGATIVE", "BYTES", "STORED", "HITS", "OVER SHARE");
	for (size_t i = 0; i < reply->n_rec; i++) {
		const struct jc_record *r = &reply->rec[i];
		struct passwd *pw = getpwuid((uid_t)jc__ctl_getu(r, "uid"));
		printf("%10" PRIu64 "  ", jc__ctl_getu(r, "uid"));
		if (pw)
			jc__escape_fputs(pw->pw_name, stdout);
		printf("%*s  %10" PRIu64 "  %10" PRIu64 "  %14" PRIu64 "  %14" PRIu64 "  %10" PRIu64
		       "  %s\n",
		       pw ? 16 - (int)strlen(pw->pw_name) : 16, pw ? "" : "-",
		       jc__ctl_getu(r, "entries"), jc__ctl_getu(r, "negative_entries"),
		       jc__ctl_getu(r, "bytes"), jc__ctl_getu(r, "stored_bytes"),
		       jc__ctl_getu(r, "hits"), jc__ctl_geti(r, "over_share") ? "yes" : "no");
	}
}

/* A table in the manner of `ccache -s`: requests by outcome, compiles,
 * problems, the store against its budget, versions. */
static void print_stats_human(const struct jc_record *r)
{
	uint64_t hits = jc__ctl_getu(r, "hits"), misses = jc__ctl_getu(r, "misses");
	uint64_t neg = jc__ctl_getu(r, "negative_hits"),
		 joins = jc__ctl_getu(r, "single_flight_joins");
	uint64_t compiles = jc__ctl_getu(r, "compiles"), total = hits + misses + neg + joins;
	int64_t up = jc__ctl_geti(r, "uptime_s");
	char used[32], budget[32], low[32], artifacts[32];
	uint64_t stored = jc__ctl_getu(r, "stored_bytes") + jc__ctl_getu(r, "overhead_bytes");
	human_bytes(used, sizeof(used), (double)stored);
	human_bytes(artifacts, sizeof(artifacts), (double)jc__ctl_getu(r, "bytes"));
	human_bytes(budget, sizeof(budget), (double)jc__ctl_getu(r, "max_size"));
	human_bytes(low, sizeof(low), (double)jc__ctl_getu(r, "evict_low_water"));
	printf("Cache directory:          %s\n", jc__ctl_gets(r, "cache_dir"));
	if (up >= 0)
		printf("Daemon:                   pid %" PRId64 ", up %" PRId64 "d %02" PRId64
		       "h %02" PRId64 "m %02" PRId64 "s\n",
		       jc__ctl_geti(r, "daemon_pid"), up / 86400, up / 3600 % 24, up / 60 % 60,
		       up % 60);
	else
		printf("Daemon:                   none running (figures read from the cache "
		       "directory)\n");
	printf("Requests:                 %10" PRIu64 "\n", total);
	printf("  Hits:                   %10" PRIu64 "  %6.2f %%\n", hits,
	       pct((double)hits, (double)total));
	printf("  Negative hits:          %10" PRIu64 "  %6.2f %%\n", neg,
	       pct((double)neg, (double)total));
	printf("  Misses:                 %10" PRIu64 "  %6.2f %%\n", misses,
	       pct((double)misses, (double)total));
	printf("  Single-flight joins:    %10" PRIu64 "  %6.2f %%\n", joins,
	       pct((double)joins, (double)total));
	printf("Hit ratio:                %17.2f %%\n", pct((double)(hits + neg), (double)total));
	/* The histogram is the daemon's own, since its start or stats --zero:
	 * it may count fewer hits than the persistent counter above. */
	int64_t since = jc__ctl_geti(r, "hit_latency_since");
	if (up < 0)
		printf("Hit latency (daemon):     - (no daemon running)\n");
	else if (jc__ctl_getu(r, "hit_latency_samples") > 0)
		printf("Hit latency (daemon):     p50 %" PRId64 " us, p99 %" PRId64 " us (%" PRIu64
		       " hits since %s)\n",
		       jc__ctl_geti(r, "hit_p50_us"), jc__ctl_geti(r, "hit_p99_us"),
		       jc__ctl_getu(r, "hit_latency_samples"), when(since));
	else
		printf("Hit latency (daemon):     no hits since %s\n", when(since));
	printf("Compiles:                 %10" PRIu64 "\n", compiles);
	printf("  Failures:               %10" PRIu64 "\n", jc__ctl_getu(r, "compile_failures"));
	printf("  Timeouts:               %10" PRIu64 "\n", jc__ctl_getu(r, "compile_timeouts"));
	printf("  Mean compile time:      %13.1f ms\n",
	       compiles ? (double)jc__ctl_getu(r, "compile_ns") / 1e6 / (double)compiles : 0.0);
	printf("Worker crashes:           %10" PRIu64 "\n", jc__ctl_getu(r, "worker_crashes"));
	printf("Corrupt objects:          %10" PRIu64 "\n", jc__ctl_getu(r, "corrupt_objects"));
	printf("Load failures reported:   %10" PRIu64 "\n", jc__ctl_getu(r, "load_failures"));
	printf("Bad requests:             %10" PRIu64 "\n", jc__ctl_getu(r, "bad_requests"));
	printf("Entries:                  %10" PRIu64 "  (+ %" PRIu64 " negative)\n",
	       jc__ctl_getu(r, "entries"), jc__ctl_getu(r, "negative_entries"));
	printf("Size:                     %s of %s (%.1f %%): artifacts %s, logs, rows, index, "
	       "reserve\n",
	       used, budget, pct((double)stored, (double)jc__ctl_getu(r, "max_size")), artifacts);
	if (jc__ctl_geti(r, "disk_full"))
		printf("Disk full:                %" PRId64
		       " KiB free; hits served, nothing stored\n",
		       jc__ctl_geti(r, "disk_free_bytes") >> 10);
	printf("  Eviction:               above %s, down to %s, least recently used first\n",
	       budget, low);
	if (jc__ctl_getu(r, "user_max_size")) {
		human_bytes(budget, sizeof(budget), (double)jc__ctl_getu(r, "user_max_size"));
		printf("  Share of each uid:      %s (--user-max-size)\n", budget);
	}
	printf("Evictions:                %10" PRIu64 "\n", jc__ctl_getu(r, "evictions"));
	printf("  From uids over share:   %10" PRIu64 "\n", jc__ctl_getu(r, "user_evictions"));
	print_remote(r);
	printf("Versions:                 jitcache %s, NVRTC %s, nvJitLink %s, driver %s\n",
	       jc__ctl_gets(r, "version"), jc__ctl_gets(r, "nvrtc_version"),
	       jc__ctl_gets(r, "nvjitlink_version"), jc__ctl_gets(r, "driver_version"));
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void prom_label(const char *name, const char *v, int last)
{
	printf("%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", stdout);
		else
			putchar(*v);
	}
	fputs(last ? "\"" : "\",", stdout);
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A summary of a latency the daemon keeps (p50, p99 in us, count, sum in ns
 * by their stats names): NaN quantiles while it has no sample. */
static void prom_summary(const struct jc_record *r, const char *name, const char *help,
			 const char *p50, const char *p99, const char *count, const char *sum)
{
	uint64_t n = jc__ctl_getu(r, count);
	prom_family(name, "summary", help);
	if (n > 0)
		printf("%s{quantile=\"0.5\"} %.9g\n%s{quantile=\"0.99\"} %.9g\n", name,
		       (double)jc__ctl_geti(r, p50) / 1e6, name,
		       (double)jc__ctl_geti(r, p99) / 1e6);
	else
		printf("%s{quantile=\"0.5\"} NaN\n%s{quantile=\"0.99\"} NaN\n", name, name);
	printf("%s_sum %.9g\n%s_count %" PRIu64 "\n", name, (double)jc__ctl_getu(r, sum) / 1e9,
	       name, n);
}

/*
 * The text exposition format (version 0.0.4) for node-exporter's textfile
 * collector: counters as jitcache_<name>_total (nanosecond counters in
 * seconds, as *_seconds_total), gauges, the server-side hit latency as a
 * summary, and the versions as labels of jitcache_build_info.
 */
static void print_prometheus(const struct jc_record *r)
{
	int up = jc__ctl_geti(r, "uptime_s") >= 0;
	prom_family("jitcache_up", "gauge",
		    "1 when a daemon answered, 0 when read from the cache directory");
	printf("jitcache_up %d\n", up);
	for (int i = 0; i < JC_CTR__COUNT; i++) {
		const char *n = jc__counter_names[i];
		char name[128];
		size_t len = strlen(n);
		if (!jc__record_get(r, n))
			continue; /* not this caller's (a non-admin: its own figures only) */
		if (len > 3 && strcmp(n + len - 3, "_ns") == 0) {
			snprintf(name, sizeof(name), "jitcache_%.*s_seconds_total", (int)(len - 3),
				 n);
			prom_family(name, "counter", jc__counter_help[i]);
			printf("%s %.9g\n", name, (double)jc__ctl_getu(r, n) / 1e9);
		} else {
			snprintf(name, sizeof(name), "jitcache_%s_total", n);
			prom_family(name, "counter", jc__counter_help[i]);
			printf("%s %" PRIu64 "\n", name, jc__ctl_getu(r, n));
		}
	}
	static const char *const gauges[][3] = {
	    {"jitcache_entries", "entries", "cached artifacts"},
	    {"jitcache_negative_entries", "negative_entries", "cached compile failures"},
	    {"jitcache_bytes", "bytes", "bytes of cached artifacts"},
	    {"jitcache_stored_bytes", "stored_bytes",
	     "bytes the entries store: objects, logs, rows"},
	    {"jitcache_overhead_bytes", "overhead_bytes",
	     "bytes the cache directory holds besides"},
	    {"jitcache_disk_full", "disk_full", "1 while the disk is full: nothing is stored"},
	    {"jitcache_max_size_bytes", "max_size", "byte budget (--max-size)"},
	    {"jitcache_evict_low_water_bytes", "evict_low_water", "eviction stops at these bytes"},
	};
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
		prom_family(gauges[i][0], "gauge", gauges[i][2]);
		printf("%s %" PRIu64 "\n", gauges[i][0], jc__ctl_getu(r, gauges[i][1]));
	}
	if (up) {
		prom_family("jitcache_uptime_seconds", "gauge", "seconds since the daemon started");
		printf("jitcache_uptime_seconds %" PRId64 "\n", jc__ctl_geti(r, "uptime_s"));
		prom_summary(r, "jitcache_hit_duration_seconds",
			     "server-side time of cache hits since the start or stats --zero",
			     "hit_p50_us", "hit_p99_us", "hit_latency_samples",
			     "hit_latency_sum_ns");
	}
	const char *state = jc__ctl_gets(r, "remote_state");
	if (up && *state && strcmp(state, "off") != 0) {
		static const char *const states[] = {"up", "degraded", "down"};
		prom_family("jitcache_remote_state", "gauge",
			    "1 for the remote tier's state now (up, degraded: recent failures, "
			    "down: skipped)");
		for (size_t i = 0; i < 3; i++)
			printf("jitcache_remote_state{state=\"%s\"} %d\n", states[i],
			       strcmp(state, states[i]) == 0);
		prom_summary(r, "jitcache_remote_hit_duration_seconds",
			     "remote hits: fetch and verification, since the start or stats --zero",
			     "remote_p50_us", "remote_p99_us", "remote_latency_samples",
			     "remote_latency_sum_ns");
	}
	prom_family("jitcache_build_info", "gauge",
		    "versions of jitcache and of the CUDA toolchain it uses");
	fputs("jitcache_build_info{", stdout);
	prom_label("version", jc__ctl_gets(r, "version"), 0);
	prom_label("nvrtc", jc__ctl_gets(r, "nvrtc_version"), 0);
	prom_label("nvjitlink", jc__ctl_gets(r, "nvjitlink_version"), 0);
	prom_label("driver", jc__ctl_gets(r, "driver_version"), 1);
	fputs("} 1\n", stdout);
}

/* The records of a show or another command's reply: name and value per
 * line, times as local time, a log last. */
static void print_records(const struct jc_admin_reply *reply)
{
	for (size_t i = 0; i < reply->n_rec; i++) {
		const struct jc_record *r = &reply->rec[i];
		for (size_t k = 0; k < r->n; k++) {
			const struct jc_kv *kv = &r->kv[k];
			if (strcmp(kv->name, "log") == 0)
				continue;
			if (!kv->is_int && strcmp(kv->name, "users") == 0) {
				printf("%-12s ", kv->name);
				print_users(kv->s);
			} else if (!kv->is_int) {
				printf("%-12s ", kv->name);
				jc__escape_fputs(kv->s, stdout);
				putchar('\n');
			} else if (kv->i > 0 && (strcmp(kv->name, "created") == 0 ||
						 strcmp(kv->name, "last_access") == 0 ||
						 strcmp(kv->name, "expires") == 0))
				printf("%-12s %s (%" PRId64 ")\n", kv->name, when(kv->i), kv->i);
			else
				printf("%-12s %" PRId64 "\n", kv->name, kv->i);
		}
		const char *log = jc__ctl_gets(r, "log");
		if (*log) {
			fputs("log:\n", stdout);
			jc__escape_fputs(log, stdout);
			if (log[strlen(log) - 1] != '\n')
				putchar('\n');
		}
	}
}

/* A successful reply to command, printed as its flags (LISTS: a list) and
 * the options given say: --json, --prometheus, stats --zero. */
static void print_reply(const char *command, const struct jc_admin_reply *reply, unsigned flags,
			int json, int prom, int zero)
{
	if (json && (flags & JC_ADMIN_LISTS)) {
		fputc('[', stdout);
		for (size_t i = 0; i < reply->n_rec; i++) {
			fputs(i ? ",\n " : "", stdout);
			json_record(stdout, &reply->rec[i]);
		}
		fputs("]\n", stdout);
	} else if (json || strcmp(command, "ping") == 0) {
		for (size_t i = 0; i < reply->n_rec; i++) {
			json_record(stdout, &reply->rec[i]);
			fputc('\n', stdout);
		}
	} else if (strcmp(command, "version") == 0 && reply->n_rec) {
		/* one "name  value" line per field; --json: the record as it is */
		const struct jc_record *r = &reply->rec[0];
		for (size_t k = 0; k < r->n; k++) {
			printf("%-19s ", r->kv[k].name);
			if (r->kv[k].is_int)
				printf("%" PRId64 "\n", r->kv[k].i);
			else {
				jc__escape_fputs(r->kv[k].s, stdout);
				putchar('\n');
			}
		}
	} else if (strcmp(command, "stats") == 0 && (flags & JC_ADMIN_LISTS)) {
		print_by_user(reply);
	} else if (strcmp(command, "stats") == 0 && zero) {
		printf("counters reset (the figures before the reset follow)\n");
		print_stats_human(&reply->rec[0]);
	} else if (strcmp(command, "stats") == 0 && reply->n_rec) {
		if (prom)
			print_prometheus(&reply->rec[0]);
		else if (strcmp(jc__ctl_gets(&reply->rec[0], "scope"), "all") != 0 &&
			 *jc__ctl_gets(&reply->rec[0], "scope"))
			print_stats_own(&reply->rec[0]);
		else
			print_stats_human(&reply->rec[0]);
	} else if (strcmp(command, "purge") == 0) {
		for (size_t i = 0; i < reply->n_rec; i++)
			printf("%s  %-6s  %10" PRId64 "\n", jc__ctl_gets(&reply->rec[i], "key"),
			       jc__ctl_gets(&reply->rec[i], "status"),
			       jc__ctl_geti(&reply->rec[i], "size"));
	} else if (strcmp(command, "ls") == 0) {
		printf("%-32s  %-8s  %-10s  %10s  %6s  %-19s  %s\n", "KEY", "KIND", "ARCH", "SIZE",
		       "HITS", "LAST ACCESS", "SOURCE");
		for (size_t i = 0; i < reply->n_rec; i++) {
			const struct jc_record *r = &reply->rec[i];
			printf("%-32s  %-8s  %-10s  %10" PRId64 "  %6" PRId64 "  %-19s  ",
			       jc__ctl_gets(r, "key"), jc__ctl_gets(r, "kind"),
			       jc__ctl_gets(r, "arch"), jc__ctl_geti(r, "size"),
			       jc__ctl_geti(r, "hits"), when(jc__ctl_geti(r, "last_access")));
			/* Names and logs are other clients' words: never an escape
			 * sequence on this terminal. */
			jc__escape_fputs(jc__ctl_gets(r, "source_name"), stdout);
			putchar('\n');
		}
	} else {
		print_records(reply);
	}
}

/* Parses the options of an admin command (its arguments in the command
 * table, admin.h) into "name[=value]" arguments. */
int jc__ctl_cmd_admin(const char *command, int argc, char **argv)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(command);
	if (!cmd)
		return jc__ctl_die(2, "%s is not an admin command", command);
	struct option opts[32] = {{"json", no_argument, NULL, 0}};
	const struct jc_admin_arg *specs[32] = {NULL};
	const struct jc_admin_arg *positional = NULL;
	size_t n_opts = 1;
	for (const struct jc_admin_arg *a = cmd->args; a && a->name && n_opts < 31; a++) {
		if (!a->option) {
			positional = a;
			continue;
		}
		specs[n_opts] = a;
		opts[n_opts++] = (struct option){
		    a->option, a->kind == JC_ARG_FLAG ? no_argument : required_argument, NULL, 0};
	}
	struct jc_strv args = {0};
	int json = 0, prom = 0, zero = 0, c, idx, rc = 2;
	char buf[128];
	int64_t secs;
	uint64_t size;
	unsigned flags = cmd->flags;
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		const struct jc_admin_arg *a = c == 0 ? specs[idx] : NULL;
		if (c != 0) {
			jc__ctl_sub_usage(stderr, command);
			goto out;
		}
		if (!a) {
			json = 1;
			continue;
		}
		flags |= a->flags;
		if (a->flags & JC_ADMIN_LOCAL) { /* how to print: stats --prometheus */
			prom = 1;
			continue;
		}
		zero |= strcmp(a->name, "zero") == 0;
		switch (a->kind) {
		case JC_ARG_FLAG:
			snprintf(buf, sizeof(buf), "%s", a->name);
			break;
		case JC_ARG_SECONDS:
			if (jc__parse_duration(optarg, &secs) != 0) {
				jc__ctl_die(2, "bad duration '%s' (e.g. 90s, 15m, 2h, 7d)", optarg);
				goto out;
			}
			snprintf(buf, sizeof(buf), "%s=%" PRId64, a->name, secs);
			break;
		case JC_ARG_BYTES:
			if (jc__parse_size(optarg, &size) != 0) {
				jc__ctl_die(2, "bad size '%s' (e.g. 500M, 2G)", optarg);
				goto out;
			}
			snprintf(buf, sizeof(buf), "%s=%" PRIu64, a->name, size);
			break;
		default:
			snprintf(buf, sizeof(buf), "%s=%s", a->name, optarg);
		}
		jc__strv_push(&args, buf);
	}
	if (json && prom) {
		jc__ctl_die(2, "stats: choose one of --json and --prometheus");
		goto out;
	}
	if (positional) {
		if (optind >= argc) {
			jc__ctl_die(2, "%s needs a KEY", command);
			goto out;
		}
		snprintf(buf, sizeof(buf), "%s=%s", positional->name, argv[optind++]);
		jc__strv_push(&args, buf);
	}
	if (optind < argc) {
		jc__ctl_die(2, "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	struct jc_admin_reply reply = {0};
	rc = jc__ctl_admin(command, &args, (flags & JC_ADMIN_OFFLINE) != 0, &reply);
	if (rc == 0 && reply.status != 0 && reply.status != JC_ECORRUPT) {
		rc = jc__ctl_die(1, "%s: %s", command,
				 reply.message ? reply.message : jc_strerror(reply.status));
	} else if (rc == 0) {
		print_reply(command, &reply, flags, json, prom, zero);
		/* A change's summary (purge, verify, gc: what it removed or
		 * found) is its result, on stdout with its records; a listing's
		 * note (ls, export: where it was cut) goes to stderr. */
		if (reply.message && !json)
			fprintf(flags & JC_ADMIN_MUTATING ? stdout : stderr, "%s\n", reply.message);
		if (reply.status == JC_ECORRUPT)
			rc = 1;
	}
	jc__admin_reply_clear(&reply);
out:
	for (size_t i = 0; i < args.n; i++)
		free(args.v[i]);
	free(args.v);
	return rc;
}
