/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int jc__log_level = LOG_NOTICE;

static const char *const group_names[] = {
#define X(g) #g,
	JC_LOG_GROUPS(X)
#undef X
};

static const char *const level_names[] = {
	"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

int jc__log_parse_level(const char *s)
{
	for (int i = 0; i < 8; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	if (strcmp(s, "error") == 0)
		return LOG_ERR;
	if (strcmp(s, "warn") == 0)
		return LOG_WARNING;
	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	return -1;
}

void jc__log(int level, enum jc_log_group group, const char *fmt, ...)
{
	char line[2048];
	int n = snprintf(line, sizeof(line), "<%d>jitcached[%d] %s %s: ", level, (int)getpid(),
			 level_names[level & 7], group_names[group]);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strnlen(line, sizeof(line) - 2);
	line[len++] = '\n';
	/* One write so lines from several processes do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void jc__assert_fail(const char *expr, const char *file, int line)
{
	jc__log(LOG_CRIT, JC_LOG_MAIN, "assertion failed: %s (%s:%d)", expr, file, line);
	abort();
}
