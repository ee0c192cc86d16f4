# SPDX-License-Identifier: MIT
"""One fresh process of the GPU tests (test_gpu.py): SAXPY compiled through
jitcache in one of four ways, launched on device 0 and checked against
NumPy. Prints one JSON line: how the compile was served ("status", and the
daemon's hit/miss counts around it) and whether the result was right.

Usage: gpu_saxpy.py MODE SOCKET SAXPY_CU
MODE: cupy-hook (jitcache.cupy.install + cupy.RawModule), cupy-helper
(Client.compile with arch=None + jitcache.cupy.raw_module), core-program
(jitcache.cuda_core.Program), core-helper (Client.compile +
jitcache.cuda_core.object_code).
"""
import json
import sys

import cupy as cp
import numpy as np

import jitcache

mode, sock, src_path = sys.argv[1:4]
src = open(src_path).read()
exprs = ("saxpy<float>", "saxpy<double>")
n = 1 << 20
# Data through copies only: no CuPy kernel is compiled besides SAXPY.
x_host = (0.5 + (np.arange(n) % 1024) / 1024).astype(np.float32)
y_host = ((np.arange(n) % 7) - 3).astype(np.float32)
x, y = cp.asarray(x_host), cp.asarray(y_host)
client = jitcache.Client(sock)
arch = "sm_" + cp.cuda.Device(0).compute_capability
status = None

if mode == "cupy-hook":
    import jitcache.cupy
    jitcache.cupy.install(client)
before = client.stats()
if mode == "cupy-hook":
    fn = cp.RawModule(code=src, options=("-std=c++17",),
                      name_expressions=exprs).get_function("saxpy<float>")
elif mode == "cupy-helper":
    import jitcache.cupy
    res = client.compile(src, name="saxpy.cu", arch=None, options=["-std=c++17"],
                         name_expressions=exprs)
    status = res.status
    fn = jitcache.cupy.raw_module(res).get_function("saxpy<float>")
else:
    from cuda.core import Device, LaunchConfig, launch, ProgramOptions

    import jitcache.cuda_core
    dev = Device(0)
    dev.set_current()
    if mode == "core-program":
        prog = jitcache.cuda_core.Program(src, "c++", ProgramOptions(std="c++17", arch=arch),
                                          client=client)
        obj = prog.compile("cubin", name_expressions=exprs)
        status = prog.last_result.status
    else:
        res = client.compile(src, name="saxpy.cu", arch=arch, options=["-std=c++17"],
                             name_expressions=exprs)
        status = res.status
        obj = jitcache.cuda_core.object_code(res, name="saxpy.cu")
    kernel = obj.get_kernel("saxpy<float>")
after = client.stats()

if mode.startswith("cupy"):
    fn(((n + 255) // 256,), (256,), (cp.float32(2.0), x, y, cp.uint64(n)))
    cp.cuda.runtime.deviceSynchronize()
else:
    stream = dev.create_stream()
    dev.sync()  # the copies ran on CuPy's stream
    launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kernel,
           np.float32(2.0), x.data.ptr, y.data.ptr, np.uint64(n))
    stream.sync()
ok = bool(np.array_equal(cp.asnumpy(y), y_host + np.float32(2.0) * x_host))
print(json.dumps({"mode": mode, "status": status, "ok": ok,
                  "hits": after["hits"] - before["hits"],
                  "misses": after["misses"] - before["misses"],
                  "cupy": cp.__version__,
                  "cuda.core": sys.modules["cuda.core"].__version__ if "cuda.core" in sys.modules
                  else None}))
