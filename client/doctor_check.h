/* SPDX-License-Identifier: MIT */
/*
 * What doctor.c and doctor_driver.c share: the report (its lines and
 * counts) and the driver checks. Private to jitcachectl's doctor
 * (client/doctor.h is its interface); single-threaded.
 */
#ifndef JC_DOCTOR_CHECK_H
#define JC_DOCTOR_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "core/toolchain.h"

/* The checks' tally: FAIL and warn lines so far. */
struct report {
	int fails, warns;
};

enum verdict { OK, INFO, WARN, FAIL };

/* One "ok|info|warn|FAIL  text" line (printf format) on stdout, counted in r. */
static inline void say(struct report *r, enum verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void say(struct report *r, enum verdict v, const char *fmt, ...)
{
	static const char *const words[] = {"ok", "info", "warn", "FAIL"};
	va_list ap;
	printf("%-5s ", words[v]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	r->warns += v == WARN;
	r->fails += v == FAIL;
}

/* The driver checks, in order: the CUDA runtime; libcuda (dlopen'ed),
 * whether it matches the kernel module, each device, MIG and MPS; the PTX
 * this NVRTC emits against the driver (needs tc: NULL when the toolchain is
 * unknown, then only what needs no NVRTC). Lines to stdout through r. */
void jc__doctor_driver(struct report *r, const struct jc_toolchain *tc);

#endif
