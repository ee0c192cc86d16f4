/* SPDX-License-Identifier: MIT */
/*
 * Leveled logging for the daemon and tools, to stderr (journald takes it
 * under systemd). Syslog levels; NOTICE by default. Not for the client
 * library, which never prints.
 */
#ifndef JC_LOG_H
#define JC_LOG_H

#include <stddef.h>
#include <stdio.h>
#include <syslog.h>

/* Log groups, printed as a prefix. */
#define JC_LOG_GROUPS(X)                                                                           \
	X(MAIN) X(NET) X(STORE) X(INDEX) X(KEY) X(WORKER) X(ADMIN) X(EVICT) X(REMOTE)
enum jc_log_group {
#define X(g) JC_LOG_##g,
	JC_LOG_GROUPS(X)
#undef X
};

/* Threshold: messages above it (less severe) are dropped. Not thread-safe to change. */
extern int jc__log_level;
/* Parses "err", "warning", "notice", "info", "debug" (or 0..7); returns -1 if unknown. */
int jc__log_parse_level(const char *s);
/*
 * Copies the NUL-terminated in to out (cap bytes, cap > 0; always
 * NUL-terminated, cut at a character boundary when too long) with every
 * control character (below 0x20, DEL), every byte that is not part of
 * well-formed UTF-8 and every C1 control (U+0080..U+009F) written as \xNN.
 * Returns the length written. jc__log() applies it to every message, so any
 * client-supplied string in a log line is escaped. Thread-safe.
 */
size_t jc__log_escape(const char *in, char *out, size_t cap);
/* Writes s (NUL-terminated) to f escaped as by jc__log_escape(), except that
 * newlines and tabs stay: for text from a daemon or a file (source names,
 * compile logs, kernel names) printed on a terminal, where an escape
 * sequence would act. Thread-safe as stdio is. */
void jc__escape_fputs(const char *s, FILE *f);
/* Formats and writes one line to stderr, escaped as by jc__log_escape(). */
void jc__log(int level, enum jc_log_group group, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define jc_log(lvl, grp, ...)                                                                      \
	do {                                                                                       \
		if ((lvl) <= jc__log_level)                                                        \
			jc__log((lvl), JC_LOG_##grp, __VA_ARGS__);                                 \
	} while (0)
#define jc_log_err(grp, ...)	jc_log(LOG_ERR, grp, __VA_ARGS__)
#define jc_log_warn(grp, ...)	jc_log(LOG_WARNING, grp, __VA_ARGS__)
#define jc_log_notice(grp, ...) jc_log(LOG_NOTICE, grp, __VA_ARGS__)
#define jc_log_info(grp, ...)	jc_log(LOG_INFO, grp, __VA_ARGS__)
#define jc_log_debug(grp, ...)	jc_log(LOG_DEBUG, grp, __VA_ARGS__)

/* Invariant that must hold: aborts with file:line when it does not. */
#define jc_assert(cond)                                                                            \
	do {                                                                                       \
		if (!(cond))                                                                       \
			jc__assert_fail(#cond, __FILE__, __LINE__);                                \
	} while (0)
/* Recoverable check: logs and evaluates to false so the caller can bail out. */
#define jc_check(cond)                                                                             \
	((cond) ? 1                                                                                \
		: (jc__log(LOG_ERR, JC_LOG_MAIN, "check failed: %s (%s:%d)", #cond, __FILE__,      \
			   __LINE__),                                                              \
		   0))
void jc__assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

#endif
