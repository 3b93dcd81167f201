"""A process forked from one that used OpenCL never reaches the driver (backend/forked.py).

On NVIDIA a forked child that releases an inherited handle destroys the parent's object (the H200 run: a forked
DataLoader worker crashed dropping its inherited runtimes, and the parent's context was dead from then on). The
driver calls are counted where pyopencl makes them: a small library preloaded into the test's process wraps
libOpenCL's entry points (releases, enqueues, finishes, buffer creation, event queries) and logs each call with
the calling process's id, so a call made by the child, through arithmetic, a finalizer or interpreter teardown,
shows up. Needs a C compiler (skipped without one)."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cltorch

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;

static void *real(const char *name) {         /* the libOpenCL that pyopencl loaded */
    static void *lib;
    if (!lib) lib = dlopen(getenv("SHIM_REAL_LIBOPENCL"), RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen(getenv("SHIM_REAL_LIBOPENCL"), RTLD_NOW);
    return dlsym(lib, name);
}

static void note(const char *name) {
    const char *path = getenv("SHIM_LOG");
    int fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
    if (fd < 0) return;
    char buf[160];
    int n = snprintf(buf, sizeof buf, "%d %s\n", (int)getpid(), name);
    if (n > 0) { ssize_t r = write(fd, buf, (size_t)n); (void)r; }
    close(fd);
}

#define ONE(name) \
    cl_int name(void *o) { static cl_int (*f)(void *); if (!f) f = real(#name); note(#name); return f(o); }
ONE(clReleaseMemObject) ONE(clReleaseKernel) ONE(clReleaseProgram) ONE(clReleaseCommandQueue)
ONE(clReleaseContext) ONE(clReleaseEvent) ONE(clReleaseSampler) ONE(clFinish) ONE(clFlush)

cl_int clEnqueueNDRangeKernel(void *q, void *k, cl_uint d, const size_t *o, const size_t *g, const size_t *l,
                              cl_uint n, const void *w, void *e) {
    static cl_int (*f)(void *, void *, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,
                       const void *, void *);
    if (!f) f = real("clEnqueueNDRangeKernel");
    note("clEnqueueNDRangeKernel");
    return f(q, k, d, o, g, l, n, w, e);
}

#define RW(name) \
    cl_int name(void *q, void *m, cl_uint b, size_t off, size_t sz, void *p, cl_uint n, const void *w, void *e) { \
        static cl_int (*f)(void *, void *, cl_uint, size_t, size_t, void *, cl_uint, const void *, void *); \
        if (!f) f = real(#name); note(#name); return f(q, m, b, off, sz, p, n, w, e); }
RW(clEnqueueWriteBuffer) RW(clEnqueueReadBuffer)

cl_int clEnqueueCopyBuffer(void *q, void *s, void *d, size_t so, size_t dof, size_t sz, cl_uint n, const void *w,
                           void *e) {
    static cl_int (*f)(void *, void *, void *, size_t, size_t, size_t, cl_uint, const void *, void *);
    if (!f) f = real("clEnqueueCopyBuffer");
    note("clEnqueueCopyBuffer");
    return f(q, s, d, so, dof, sz, n, w, e);
}

cl_int clEnqueueFillBuffer(void *q, void *m, const void *p, size_t ps, size_t off, size_t sz, cl_uint n,
                           const void *w, void *e) {
    static cl_int (*f)(void *, void *, const void *, size_t, size_t, size_t, cl_uint, const void *, void *);
    if (!f) f = real("clEnqueueFillBuffer");
    note("clEnqueueFillBuffer");
    return f(q, m, p, ps, off, sz, n, w, e);
}

cl_int clGetEventInfo(void *e, cl_uint p, size_t s, void *v, size_t *r) {
    static cl_int (*f)(void *, cl_uint, size_t, void *, size_t *);
    if (!f) f = real("clGetEventInfo");
    note("clGetEventInfo");
    return f(e, p, s, v, r);
}

void *clCreateBuffer(void *c, cl_bitfield fl, size_t sz, void *h, cl_int *err) {
    static void *(*f)(void *, cl_bitfield, size_t, void *, cl_int *);
    if (!f) f = real("clCreateBuffer");
    note("clCreateBuffer");
    return f(c, fl, sz, h, err);
}
"""

# The parent uses a cl device and the cpu device (kernels over pooled host memory and over numpy's), leaves work
# queued, holds a kernel handle in a module global, and forks; the child (a) meets the fork error at arithmetic
# and at a device read, reads inherited cpu memory on the host, (b) drops every tensor, collects, and leaves
# through a normal interpreter exit (module teardown, which releases what module globals hold); then (c) the
# parent computes on both devices again.
SCRIPT = textwrap.dedent("""
    import gc, os, sys
    import numpy as np
    import cltorch
    dev = cltorch.ones(1000, device="cl:0")
    y = (dev * 2).exp()
    c = cltorch.arange(70000, dtype=cltorch.float32) / 70000      # above the numpy path: kernels on the cpu device
    cy = c.exp()
    h = cltorch.from_numpy(np.ones(70000, np.float32))            # numpy's memory: its own zero-copy buffer
    h.exp().sum().item()
    import pyopencl as cl
    k0 = next(iter(cltorch.backend.runtime(0)._kernels.values()))
    extra = cl.Kernel(k0.program, k0.function_name)               # a handle only a module global holds
    queued = dev + 3                                              # still queued when the parent forks
    pid = os.fork()
    if pid == 0:
        for name, f in (("cl", lambda: (dev + 1).sum().item()), ("cpu", lambda: cy.exp().sum().item()),
                        ("read", lambda: queued.cpu())):
            try:
                f()
                print("child", name, "no error", flush=True)
            except RuntimeError as e:
                print("child", name, "forked child" in str(e) and "forkserver" in str(e), flush=True)
        print("child host", float(np.exp(cy.numpy()[:3]).sum()) == float(np.exp(np.exp(np.arange(3) / 70000.0,
              dtype=np.float32)).sum()), flush=True)
        del dev, y, c, cy, queued, h
        gc.collect()
        print("child pid", os.getpid(), flush=True)
        sys.exit(0)
    os.waitpid(pid, 0)
    print("parent values", (dev + 1).sum().item(), float(queued.sum().item()), round(float(c.exp().sum().item()), 1),
          flush=True)
""")


def _compile_shim(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the driver-call counter")
    src = tmp_path / "shim.c"
    src.write_text(SHIM)
    so = tmp_path / "shim.so"
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(src), "-ldl"], capture_output=True,
                       text=True)
    if r.returncode:
        pytest.skip(f"could not build the driver-call counter: {r.stderr[-500:]}")
    return so


def _libopencl():
    import pyopencl
    from pyopencl import _cl
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "libOpenCL" in line:
            return line.split()[-1]
    pytest.skip(f"cannot find the libOpenCL that pyopencl uses ({pyopencl.__file__}, {_cl.__file__})")


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork and LD_PRELOAD: Linux")
def test_forked_child_never_calls_the_driver(tmp_path):
    cltorch.ones(2, device="cl:0").sum().item()      # pyopencl's libOpenCL is loaded in this process
    so = _compile_shim(tmp_path)
    log = tmp_path / "calls.log"
    env = dict(os.environ, LD_PRELOAD=str(so), SHIM_LOG=str(log), SHIM_REAL_LIBOPENCL=_libopencl())
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = dict((" ".join(line.split()[:2]), line.split()[2:]) for line in r.stdout.splitlines())
    # (a) arithmetic and a device read raise the fork error; inherited cpu memory holds the parent's finished
    # results and is read on the host
    assert out["child cl"] == ["True"] and out["child cpu"] == ["True"] and out["child read"] == ["True"], r.stdout
    assert out["child host"] == ["True"], r.stdout
    # (b) not one driver call in the child, through any of it or its exit; the counter does count the parent's
    child = out["child pid"][0]
    calls = [line.split() for line in log.read_text().splitlines()]
    in_child = [name for pid, name in calls if pid == child]
    assert not in_child, f"the forked child called the driver: {sorted(set(in_child))} ({len(in_child)} calls)"
    names = {name for pid, name in calls if pid != child}
    assert {"clEnqueueNDRangeKernel", "clReleaseMemObject", "clReleaseKernel"} <= names, names
    # (c) the parent's contexts still work after the child exited
    import numpy as np
    ref = float(np.exp(np.arange(70000, dtype=np.float32) / np.float32(70000)).astype(np.float64).sum())
    assert out["parent values"][:2] == ["2000.0", "4000.0"], r.stdout
    assert abs(float(out["parent values"][2]) - ref) < 1e-4 * ref, (out["parent values"], ref)
