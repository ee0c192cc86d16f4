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

/* Length of the well-formed UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* Overlong or out-of-range forms, surrogates, and the C1 controls
	 * U+0080..U+009F (some terminals act on them). */
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90) ||
	    (p[0] == 0xc2 && p[1] < 0xa0))
		return 0;
	return len;
}

size_t jc__log_escape(const char *in, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < n;) {
		size_t u = p[i] >= 0x80 ? utf8_len(p + i, n - i) : p[i] >= 0x20 && p[i] != 0x7f;
		char esc[5];
		const char *src = (const char *)p + i;
		size_t len = u;
		if (!u) {
			snprintf(esc, sizeof(esc), "\\x%02x", p[i]);
			src = esc;
			len = 4;
			u = 1;
		}
		if (o + len >= cap)
			break;
		memcpy(out + o, src, len);
		o += len;
		i += u;
	}
	out[o] = '\0';
	return o;
}

void jc__log(int level, enum jc_log_group group, const char *fmt, ...)
{
	char msg[2048], line[2048 + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int n = snprintf(line, sizeof(line), "<%d>jitcached[%d] %s %s: ", level, (int)getpid(),
			 level_names[level & 7], group_names[group]);
	size_t len = (size_t)n;
	/* Messages carry client-supplied names: never a control character (a
	 * newline would start a forged journal line), nor a broken UTF-8 byte. */
	len += jc__log_escape(msg, line + len, sizeof(line) - 1 - len);
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
