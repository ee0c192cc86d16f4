/* SPDX-License-Identifier: MIT */
/* `jitcachectl inspect`: printing what common/artifact.c found. */
#include "client/inspect.h"

#include <inttypes.h>

#include "common/artifact.h"
#include "common/log.h"
#include "common/util.h"

static void text_kernel(FILE *f, const struct jc_art_kernel *k)
{
	/* Names and strings from the file: never an escape sequence here. */
	fputs("    kernel ", f);
	jc__escape_fputs(k->name, f);
	const char *sep = ": ";
	if (k->registers >= 0)
		fprintf(f, "%s%" PRId32 " registers", sep, k->registers), sep = ", ";
	if (k->shared_bytes >= 0)
		fprintf(f, "%s%" PRId64 " bytes static shared", sep, k->shared_bytes), sep = ", ";
	if (k->stack_bytes >= 0)
		fprintf(f, "%s%" PRId64 " bytes stack frame", sep, k->stack_bytes), sep = ", ";
	if (k->max_threads[0])
		fprintf(f, "%slaunch bounds %" PRIu32 "x%" PRIu32 "x%" PRIu32, sep,
			k->max_threads[0], k->max_threads[1], k->max_threads[2]);
	fputc('\n', f);
}

static void text(FILE *f, const char *source, const struct jc_artifact *a)
{
	fprintf(f, "%s: %s", source, jc__art_kind_name(a->kind));
	if (a->kind == JC_ART_FATBIN)
		fprintf(f, ", %zu image%s", a->n_images, a->n_images == 1 ? "" : "s");
	fputc('\n', f);
	for (size_t i = 0; i < a->n_images; i++) {
		const struct jc_art_image *im = &a->images[i];
		char target[4 * sizeof(im->target)];
		jc__log_escape(im->target[0] ? im->target : "?", target, sizeof(target));
		fprintf(f, "  %-12s %-6s %" PRIu64 " bytes", target, jc__art_kind_name(im->kind),
			im->size);
		if (im->compression[0])
			fprintf(f, " (%s, %" PRIu64 " stored)", im->compression, im->stored_size);
		if (im->ptx_isa[0]) {
			fputs(", PTX ISA ", f);
			jc__escape_fputs(im->ptx_isa, f);
		}
		if (im->producer[0]) {
			fputs(", ", f);
			jc__escape_fputs(im->producer, f);
		}
		if (!im->decoded)
			fputs(", not decoded", f);
		fprintf(f, ", %zu kernel%s\n", im->n_kernels, im->n_kernels == 1 ? "" : "s");
		for (size_t k = 0; k < im->n_kernels; k++)
			text_kernel(f, &im->kernels[k]);
	}
}

static void json(FILE *f, const char *source, const struct jc_artifact *a)
{
	fputs("{\"source\": ", f);
	jc__json_str(f, source);
	fprintf(f, ", \"kind\": \"%s\", \"images\": [", jc__art_kind_name(a->kind));
	for (size_t i = 0; i < a->n_images; i++) {
		const struct jc_art_image *im = &a->images[i];
		fprintf(f, "%s{\"kind\": \"%s\", \"target\": ", i ? ", " : "",
			jc__art_kind_name(im->kind));
		jc__json_str(f, im->target);
		fputs(", \"ptx_isa\": ", f);
		jc__json_str(f, im->ptx_isa);
		fprintf(f,
			", \"size\": %" PRIu64 ", \"stored_size\": %" PRIu64
			", \"compression\": \"%s\", "
			"\"decoded\": %s, \"producer\": ",
			im->size, im->stored_size, im->compression, im->decoded ? "true" : "false");
		jc__json_str(f, im->producer);
		fputs(", \"kernels\": [", f);
		for (size_t j = 0; j < im->n_kernels; j++) {
			const struct jc_art_kernel *k = &im->kernels[j];
			fprintf(f, "%s{\"name\": ", j ? ", " : "");
			jc__json_str(f, k->name);
			fprintf(f,
				", \"registers\": %" PRId32 ", \"shared_bytes\": %" PRId64
				", \"stack_bytes\": %" PRId64 ", \"max_threads\": ",
				k->registers, k->shared_bytes, k->stack_bytes);
			if (k->max_threads[0])
				fprintf(f, "[%" PRIu32 ", %" PRIu32 ", %" PRIu32 "]}",
					k->max_threads[0], k->max_threads[1], k->max_threads[2]);
			else
				fputs("[]}", f);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

int jc__inspect_print(FILE *f, const char *source, const uint8_t *data, size_t size, int as_json,
		      char *err, size_t errlen)
{
	struct jc_artifact a;
	int rc = jc__artifact_parse(data, size, &a, err, errlen);
	if (rc == 0)
		(as_json ? json : text)(f, source, &a);
	jc__artifact_clear(&a);
	return rc;
}
