/* SPDX-License-Identifier: MIT */
/*
 * Progress of a long jitcachectl command (warm --wait, import --wait): on a
 * terminal one line redrawn in place, a bar with the counts and an ETA;
 * otherwise plain lines, one when the counts change (at most one a
 * second) and the last one always. Not thread-safe.
 */
#ifndef JC_PROGRESS_H
#define JC_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

struct jc_progress {
	FILE *f;
	const char *what; /* borrowed, e.g. "warm" */
	int tty;
	uint64_t t0_ns, last_ns;
	uint64_t last_done; /* done + failed at the last line */
};

/* Starts p on f (borrowed) for what (borrowed). */
void jc__progress_init(struct jc_progress *p, FILE *f, const char *what);
/* done and failed of total so far; final: the last call (ends the line). */
void jc__progress_show(struct jc_progress *p, uint64_t done, uint64_t failed, uint64_t total,
		       int final);

#endif
