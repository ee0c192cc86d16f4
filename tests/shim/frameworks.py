# SPDX-License-Identifier: MIT
"""One fresh process of a Python CUDA framework that JIT-compiles with NVRTC:
makes the CUDA context ready, compiles a kernel the framework's own way,
launches it and checks the result against the CPU (CuPy: also its own
elementwise, CUB reduction and scan, and ReductionKernel kernels). Prints
one line:

  framework=NAME version=V compile_ms=T result=ok|WRONG

compile_ms is the time of the framework call that compiles (context set up
before). The kernel's source carries $JC_SHIM_SALT in a comment, so a new
salt is a new program for every cache. Exit 77 when the framework or a GPU
is missing. test_shim.sh (case gpu) runs it with and without jitcache-run;
it sets the framework's own cache so that it does not hide the effect:
CUPY_CACHE_DIR (fresh per run), PYTORCH_KERNEL_CACHE_PATH (fresh per run) and
USE_PYTORCH_KERNEL_CACHE=0; cuda.core's Program.compile caches only when
given cache=.

Usage: frameworks.py cupy|torch|cuda.core
"""
import os
import sys
import time

SALT = os.environ.get("JC_SHIM_SALT", "0")
N = 1 << 16
SAXPY = """// jitcache shim test, salt %s
template <typename T>
__global__ void saxpy(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
""" % SALT


def skip(why):
    print("skip: " + why)
    sys.exit(77)


def report(name, version, ms, ok):
    print("framework=%s version=%s compile_ms=%.3f result=%s" % (name, version, ms, "ok" if ok else "WRONG"))
    sys.exit(0 if ok else 1)


def run_cupy():
    # CuPy's CUB reductions and scans are JIT-compiled with NVRTC on its own
    # copy of CCCL: exercised below, with its elementwise kernels.
    os.environ.setdefault("CUPY_ACCELERATORS", "cub")
    try:
        import cupy
        import numpy
    except ImportError as e:
        skip("no cupy: %s" % e)
    x = cupy.arange(N, dtype=cupy.float32) / N
    y = cupy.ones(N, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    mod = cupy.RawModule(code=SAXPY, options=("-std=c++17",), name_expressions=("saxpy<float>",))
    k = mod.get_function("saxpy<float>")
    ms = (time.perf_counter() - t0) * 1e3
    k(((N + 255) // 256,), (256,), (cupy.float32(2.0), x, y, cupy.int32(N)))
    want = 2.0 * (cupy.arange(N, dtype=cupy.float32) / N) + 1.0
    ok = bool(cupy.allclose(y, want))
    # A CUB reduction and scan, a ReductionKernel; checked on the CPU.
    hx = cupy.asnumpy(x).astype(numpy.float64)
    sumsq = cupy.ReductionKernel("T v", "T r", "v * v", "a + b", "r = a", "0", "jc_sumsq")
    got = (float(x.sum()), float(cupy.cumsum(x)[-1]), float(sumsq(x)))
    for g, w in zip(got, (hx.sum(), hx.sum(), (hx * hx).sum())):
        ok = ok and abs(g - w) <= 1e-3 * abs(w)
    report("cupy", cupy.__version__, ms, ok)


def run_torch():
    try:
        import torch
    except ImportError as e:
        skip("no torch: %s" % e)
    if not torch.cuda.is_available():
        skip("torch sees no GPU")
    a = torch.rand(N, device="cuda")
    b = torch.rand(N, device="cuda")
    torch.cuda.synchronize()
    # jiterator parses the code from its first character ("template ..."):
    # the salt goes into the body.
    code = ("template <typename T> T jc_axpy(T x, T y, T alpha) "
            "{ /* jitcache shim test, salt %s */ return alpha * x + y; }" % SALT)
    t0 = time.perf_counter()
    fn = torch.cuda.jiterator._create_jit_fn(code, alpha=1.0)
    out = fn(a, b, alpha=2.5)  # the first call compiles
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    report("torch", torch.__version__, ms, bool(torch.allclose(out, 2.5 * a + b)))


def run_cuda_core():
    try:
        import numpy as np
        from cuda import core
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError as e:
        skip("no cuda.core: %s" % e)
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    cc = dev.compute_capability
    arch = "sm_%d%d" % (cc[0], cc[1])
    host_x = (np.arange(N, dtype=np.float32) / N)
    t0 = time.perf_counter()
    prog = Program(SAXPY, code_type="c++", options=ProgramOptions(std="c++17", arch=arch))
    obj = prog.compile("cubin", name_expressions=("saxpy<float>",))
    kernel = obj.get_kernel("saxpy<float>")
    ms = (time.perf_counter() - t0) * 1e3
    try:
        import cupy
    except ImportError as e:
        skip("cuda.core test uses cupy arrays: %s" % e)
    x = cupy.asarray(host_x)
    y = cupy.ones(N, dtype=cupy.float32)
    dev.sync()
    config = LaunchConfig(grid=(N + 255) // 256, block=256)
    launch(stream, config, kernel, np.float32(2.0), x.data.ptr, y.data.ptr, np.int32(N))
    stream.sync()
    report("cuda.core", getattr(core, "__version__", "?"), ms,
           bool(np.allclose(cupy.asnumpy(y), 2.0 * host_x + 1.0)))


RUNS = {"cupy": run_cupy, "torch": run_torch, "cuda.core": run_cuda_core}
if len(sys.argv) != 2 or sys.argv[1] not in RUNS:
    print(__doc__.strip().splitlines()[-1], file=sys.stderr)
    sys.exit(2)
RUNS[sys.argv[1]]()
