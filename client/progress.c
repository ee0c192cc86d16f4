/* SPDX-License-Identifier: MIT */
/* Progress lines: see progress.h. */
#include "client/progress.h"

#include <unistd.h>

#include "common/util.h"

#define BAR 30

void jc__progress_init(struct jc_progress *p, FILE *f, const char *what)
{
	p->f = f;
	p->what = what;
	p->tty = isatty(fileno(f));
	p->t0_ns = jc__now_ns();
	p->last_ns = 0;
	p->last_done = UINT64_MAX;
}

void jc__progress_show(struct jc_progress *p, uint64_t done, uint64_t failed, uint64_t total,
		       int final)
{
	uint64_t now = jc__now_ns(), ended = done + failed;
	double elapsed = (double)(now - p->t0_ns) / 1e9;
	if (!p->tty) {
		if (!final && (ended == p->last_done || now - p->last_ns < 1000000000u))
			return;
		fprintf(p->f, "%s: %llu of %llu done, %llu failed, %.1f s\n", p->what,
			(unsigned long long)done, (unsigned long long)total,
			(unsigned long long)failed, elapsed);
	} else {
		char bar[BAR + 1];
		size_t fill = total ? (size_t)(BAR * (double)ended / (double)total) : BAR;
		for (size_t i = 0; i < BAR; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[BAR] = '\0';
		fprintf(p->f, "\r%s [%s] %llu/%llu", p->what, bar, (unsigned long long)ended,
			(unsigned long long)total);
		if (failed)
			fprintf(p->f, " (%llu failed)", (unsigned long long)failed);
		if (final || !ended || ended >= total) {
			fprintf(p->f, " %.0fs   ", elapsed);
		} else {
			double eta = elapsed / (double)ended * (double)(total - ended);
			fprintf(p->f, " ETA %d:%02d   ", (int)(eta / 60), (int)eta % 60);
		}
		if (final)
			fputc('\n', p->f);
	}
	fflush(p->f);
	p->last_ns = now;
	p->last_done = ended;
}
