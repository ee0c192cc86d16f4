/* SPDX-License-Identifier: MIT */
/*
 * Runs examples/link/link_example against a real daemon: nvcc builds the
 * device library (LTO-IR in a static library) at test time; the example
 * links a specialised kernel with it and with the user's PTX. The first run
 * misses, the second hits with the same cubin; other parameters, or a
 * rebuilt library, miss again. Prints the miss and hit times. Exits 77
 * without nvcc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/lib/test.h"

struct run {
	int rc;
	char *out; /* stdout: "spec\t...\nlink\tmiss|hit\tMS ms\tKEY\n" */
	uint8_t *cubin;
	size_t size;
};

static void run_example(const struct jtl_daemon *d, const char *lib, const char *channels,
			struct run *r)
{
	char outp[400], cubin[400];
	snprintf(outp, sizeof(outp), "%s/example.out", d->dir);
	snprintf(cubin, sizeof(cubin), "%s/specialised.cubin", d->dir);
	remove(cubin);
	r->rc = jct_sh("'%s/examples/link/link_example' --socket '%s' --devlib '%s' --spec '%s' "
		       "--channels %s -o '%s' > '%s'",
		       getenv("JC_BUILD_ROOT"), d->sock, lib, jct_example("link/spec.cu"), channels,
		       cubin, outp);
	size_t n;
	r->out = (char *)jtl_read_file(outp, &n);
	r->cubin = jtl_read_file(cubin, &r->size);
	if (r->rc != 0)
		fail_msg("link_example: exit %d\n%s", r->rc, r->out ? r->out : "");
}

static const char *link_line(const struct run *r)
{
	const char *l = strstr(r->out, "link\t");
	assert_non_null(l);
	return l;
}

static void free_run(struct run *r)
{
	free(r->out);
	free(r->cubin);
}

static void test_link_example(void **state)
{
	(void)state;
	const char *nvcc = jct_nvcc();
	struct jtl_daemon d;
	jct_daemon_init(&d);
	char lib[400], lib2[400];
	snprintf(lib, sizeof(lib), "%s/libdevlib.a", d.dir);
	snprintf(lib2, sizeof(lib2), "%s/libdevlib2.a", d.dir);
	assert_int_equal(jct_sh("cd '%s' && '%s' -arch=sm_90 -dc -dlto '%s' -o devlib.o && "
				"'%s' -lib devlib.o -o '%s'",
				d.dir, nvcc, jct_example("link/devlib.cu"), nvcc, lib),
			 0);
	jct_daemon_start(&d, NULL);

	struct run miss, hit, other, rebuilt;
	run_example(&d, lib, "8", &miss);
	run_example(&d, lib, "8", &hit);
	print_message("first run:  %s", link_line(&miss));
	print_message("second run: %s", link_line(&hit));
	assert_true(strncmp(link_line(&miss), "link\tmiss\t", 10) == 0);
	assert_true(strncmp(link_line(&hit), "link\thit\t", 9) == 0);
	assert_non_null(strstr(miss.out, "spec\tmiss\t"));
	assert_non_null(strstr(hit.out, "spec\thit\t"));
	assert_int_equal(jct_cubin_sm(miss.cubin, miss.size), 90);
	assert_non_null(memmem(miss.cubin, miss.size, "specialised", 11));
	assert_int_equal(miss.size, hit.size);
	assert_memory_equal(miss.cubin, hit.cubin, miss.size);
	/* 2 compiles: the PTX, and compile+link; the link took the library's LTO-IR
	 * (-lto): its functions are inlined, no call to them is left. */
	assert_int_equal(jct_stat(&d, "compiles"), 2);
	assert_null(memmem(miss.cubin, miss.size, "devlib_activation", 17));

	/* Other parameters: another kernel, another key. */
	run_example(&d, lib, "4", &other);
	assert_true(strncmp(link_line(&other), "link\tmiss\t", 10) == 0);
	assert_true(other.size != miss.size || memcmp(other.cubin, miss.cubin, miss.size) != 0);

	/* The library rebuilt with other code: its bytes are in the key. */
	assert_int_equal(jct_sh("cd '%s' && sed 's/0.125f/0.25f/' '%s' > devlib2.cu && "
				"'%s' -arch=sm_90 -dc -dlto devlib2.cu -o devlib2.o && "
				"'%s' -lib devlib2.o -o '%s'",
				d.dir, jct_example("link/devlib.cu"), nvcc, nvcc, lib2),
			 0);
	run_example(&d, lib2, "8", &rebuilt);
	assert_true(strncmp(link_line(&rebuilt), "link\tmiss\t", 10) == 0);
	assert_true(strcmp(link_line(&rebuilt) + 10, link_line(&miss) + 10) != 0);

	free_run(&miss);
	free_run(&hit);
	free_run(&other);
	free_run(&rebuilt);
	jct_daemon_cleanup(&d);
}

int main(void)
{
	if (!jct_nvcc()) {
		fprintf(stderr,
			"nvcc not found ($NVCC, $CUDA_PATH/bin, /usr/local/cuda/bin): skipped\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_link_example),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
