/* SPDX-License-Identifier: MIT */
/*
 * Multi-architecture requests: a target list ("sm_80,sm_90,compute_90",
 * output JC_OUTPUT_FATBIN) becomes one fatbin holding a cubin for each
 * sm_NN target and the PTX of each compute_NN target, in the list's order.
 *
 * How one is built (docs/ARCHITECTURE.md, "Fatbins"):
 *  1. Each target is asked for as its own single-target request (the
 *     request with arch = the target and output cubin or PTX), through the
 *     ordinary request path on an internal connection (server.c): its own
 *     key, its own entry, single flight per sub-key, compiled by the worker
 *     pool in parallel. A later single-target request is a hit.
 *  2. When every part is in, their bytes are checked against their content
 *     hashes (in the thread pool) and put into one fatbin by
 *       - nvFatbin (libnvfatbin.so.<major> beside the loaded libnvrtc, CUDA
 *         12.4+), in a compile worker (an internal JC_JOB_FATBIN job), or
 *       - the toolkit's fatbinary tool, started with uv_spawn (no shell),
 *         its inputs and output memory files (memfd_create) it opens as
 *         /proc/self/fd/N, TMPDIR the store's tmp/, killed past
 *         --compile-timeout;
 *     else the request is refused (JC_ENOTSUP) before anything compiles.
 *  3. The fatbin is an entry of the list's key (which covers the ordered
 *     list and the tool's identity) like any other artifact. Its log says
 *     where each part came from and how long each step took; its lowered
 *     names are the parts' (the same for every target).
 * A part that fails to compile fails the fatbin with that part's log
 * (JC_ECOMPILE, negative-cached like a compile error); any other failure of
 * a part, of the tool or of the hash check is returned and not cached.
 */
#ifndef JC_FATBIN_H
#define JC_FATBIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"
#include "core/targets.h"
#include "core/toolchain.h"

/*
 * Worker side of the JC_JOB_FATBIN job: req->link_inputs are the parts in
 * order (type JC_INPUT_CUBIN or JC_INPUT_PTX, name = the target),
 * req->link_options holds "-nvfatbin-library=PATH". Loads that library,
 * adds each part (nvFatbinAddCubin / nvFatbinAddPTX with the target's
 * number) with the option "-compress=false", and puts the fatbin in
 * res->data (output JC_OUTPUT_FATBIN). Returns 0, or JC_ENOTSUP (library
 * or symbol missing), JC_EINVAL (nvFatbin refused an input, its error
 * string in the message), JC_ENOMEM, with a message in err (errlen bytes).
 */
int jc__fatbin_assemble(const struct jc_req *req, struct jc_res *res, char *err, size_t errlen);

/* The nvFatbin library a JC_JOB_FATBIN request names (its
 * "-nvfatbin-library=PATH" link option; borrowed from req), or NULL. The
 * worker loads it before it confines the job (worker.c). */
const char *jc__fatbin_library(const struct jc_req *req);

#endif
