# SPDX-License-Identifier: MIT
"""CuPy's in-process kernel cache path for the same kernel as coldstart.c.

One fresh process: import cupy, make the context ready, then
cupy.RawModule(code=saxpy.cu, options=('-std=c++17',), name_expressions=...)
and .get_function('saxpy<float>') -- with CuPy's on-disk cache
($CUPY_CACHE_DIR) warm this reads the cached cubin and loads it -- then the
first launch, checked against the CPU. Prints one "key=value" line
(milliseconds), like coldstart.

With JC_CUPY_HOOK=1 the compile goes through jitcache.cupy.install()
(python/): served by jitcached instead of CuPy's own cache; the line then
starts with "cupy-jitcache" and module_ready_ms includes importing the
package and connecting.

Usage: python3 cupy_warm.py PATH/TO/saxpy.cu
"""
import os
import sys
import time

t_start = time.perf_counter()
import cupy  # noqa: E402

t_import = time.perf_counter()
cupy.cuda.Device(0).use()
x = cupy.asarray(0.5 + (cupy.arange(1 << 20, dtype=cupy.float64) % 1024) / 1024, dtype=cupy.float32)
y0 = ((cupy.arange(1 << 20) % 7) - 3).astype(cupy.float32)
y = y0.copy()
cupy.cuda.runtime.deviceSynchronize()
t_ctx = time.perf_counter()

hook = os.environ.get("JC_CUPY_HOOK") == "1"
if hook:
    import jitcache.cupy
    jitcache.cupy.install()
with open(sys.argv[1]) as f:
    src = f.read()
mod = cupy.RawModule(code=src, options=('-std=c++17',),
                     name_expressions=('saxpy<float>', 'saxpy<double>'))
fn = mod.get_function('saxpy<float>')
t_mod = time.perf_counter()

n = x.size
fn(((n + 255) // 256,), (256,), (cupy.float32(2.0), x, y, cupy.uint64(n)))
cupy.cuda.runtime.deviceSynchronize()
t_first = time.perf_counter()
ok = bool(cupy.all(y == y0 + 2 * x))


def ms(a, b):
    return (b - a) * 1e3


print(f"{'cupy-jitcache' if hook else 'cupy'} import_ms={ms(t_start, t_import):.3f} ctx_ms={ms(t_import, t_ctx):.3f} "
      f"module_ready_ms={ms(t_ctx, t_mod):.3f} first_launch_ms={ms(t_mod, t_first):.3f} "
      f"start_to_first_launch_ms={ms(t_start, t_first):.3f} cupy={cupy.__version__} "
      f"result={'ok' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
