/* SPDX-License-Identifier: MIT */
#include "common/log.h"

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
	/* Lead bytes: 0xc2..0xdf, 0xe0..0xef, 0xf0..0xf4; 0xf5..0xff start
	 * nothing (they are no UTF-8 at all). */
	size_t len = p[0] > 0xf4 ? 0 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
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

/* How to write the character at p (n bytes left): *len bytes from *src;
 * returns the bytes of p it stands for. keep_lines: newline and tab are
 * written as they are. */
static size_t escape_at(const unsigned char *p, size_t n, int keep_lines, char esc[5],
			const char **src, size_t *len)
{
	size_t u = p[0] >= 0x80 ? utf8_len(p, n)
				: (p[0] >= 0x20 && p[0] != 0x7f) ||
				      (keep_lines && (p[0] == '\n' || p[0] == '\t'));
	*src = (const char *)p;
	*len = u;
	if (u)
		return u;
	snprintf(esc, 5, "\\x%02x", p[0]);
	*src = esc;
	*len = 4;
	return 1;
}

size_t jc__log_escape(const char *in, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < n;) {
		char esc[5];
		const char *src;
		size_t len, u = escape_at(p + i, n - i, 0, esc, &src, &len);
		if (o + len >= cap)
			break;
		memcpy(out + o, src, len);
		o += len;
		i += u;
	}
	out[o] = '\0';
	return o;
}

void jc__escape_fputs(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		char esc[5];
		const char *src;
		size_t len;
		i += escape_at(p + i, n - i, 1, esc, &src, &len);
		fwrite(src, 1, len, f);
	}
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
