"""Multi-tensor launcher of the fused optimizer steps (``cl_kernels/optim.cl.mako``).

One launch updates up to ``slots`` parameters: each slot gets its own buffer arguments (OpenCL 1.2 has no
table of pointers across buffers) and a contiguous range of work-groups, so the tensor a work-group
updates is uniform within it. Larger lists are chunked into several launches. Everything that changes
from step to step (lr, bias corrections, ...) is a scalar argument: a schedule never triggers a rebuild.

Measured on PoCL (2-core EPYC, AdamW over 10M float32 params in 100 tensors, CPU time per step, best of 5):
one tensor per launch 57 ms; 8 slots per launch 373 ms without the split barrier (PoCL if-converts every
slot's body into one work-item loop) and 28 ms with it; 16 slots 23 ms. Profile keys: ``[optim] slots``,
``split_barrier``, ``local_size`` (default: the elementwise local size), ``elems_per_item``.

The kernel runs in place on the parameters' and states' storage, allocates nothing, and never waits for
the device, except that a cpu storage shared with numpy is finished before returning (DESIGN.md, 2).

Requirements checked by :func:`fusable`: the parameter, its gradient and every state tensor are
contiguous, on one device, of the parameter's floating dtype (float32 or float64). The optimizers fall
back to a contiguous copy otherwise (see ``Optimizer._apply``).
"""
from collections import deque

import numpy as np

from ..backend import geometry

__all__ = ["ALGOS", "state_names", "fused_step", "fusable", "kernel_for", "DEFAULT_SLOTS"]

DEFAULT_SLOTS = 8

# algorithm -> (function of flags giving the state tensor names, scalar argument names)
ALGOS = {
    "sgd": (lambda f: ["momentum_buffer"] if f["momentum"] else [],
            ["neg_lr", "weight_decay", "momentum", "one_minus_dampening", "first"]),
    "adam": (lambda f: ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if f["amsgrad"] else []),
             ["weight_decay", "decay", "one_minus_beta1", "beta2", "one_minus_beta2", "neg_step_size",
              "bc2_sqrt", "eps"]),
    "nadam": (lambda f: ["exp_avg", "exp_avg_sq"],
              ["weight_decay", "decay", "one_minus_beta1", "beta2", "one_minus_beta2", "bc2", "eps",
               "coef_grad", "coef_avg"]),
    "radam": (lambda f: ["exp_avg", "exp_avg_sq"],
              ["weight_decay", "decay", "one_minus_beta1", "beta2", "one_minus_beta2", "lr", "bc1", "bc2_sqrt",
               "eps", "rect", "rectify"]),
    "rmsprop": (lambda f: ["square_avg"] + (["momentum_buffer"] if f["momentum"] else [])
                + (["grad_avg"] if f["centered"] else []),
                ["neg_lr", "weight_decay", "alpha", "one_minus_alpha", "eps", "momentum"]),
    "adagrad": (lambda f: ["sum"], ["neg_clr", "weight_decay", "eps"]),
    "adamax": (lambda f: ["exp_avg", "exp_inf"],
               ["weight_decay", "one_minus_beta1", "beta2", "eps", "neg_clr"]),
}

FLAG_NAMES = ("wd", "maximize", "decoupled", "amsgrad", "momentum", "nesterov", "centered")


def state_names(algo, flags):
    """The names of the state tensors the kernel of ``algo`` with ``flags`` reads and writes."""
    return ALGOS[algo][0](_full_flags(flags))


def _full_flags(flags):
    f = dict.fromkeys(FLAG_NAMES, False)
    f.update({k: bool(v) for k, v in flags.items()})
    return f


_kernels = {}
_dummies = {}


def _dummy(rt):
    d = _dummies.get(rt.index)
    if d is None:
        d = _dummies[rt.index] = rt.alloc(64)
    return d

# Host (cpu) storages are numpy arrays behind CL_MEM_USE_HOST_PTR buffers: if the last Python reference to
# one (e.g. a gradient replaced by zero_grad) goes away while a queued kernel still reads it, numpy frees the
# memory under the kernel. Until the storage layer defers such frees itself, the launches keep references to
# the tensors they use until their event reports completion.
_inflight = deque()


def _retain(evt, refs):
    import pyopencl as cl
    done = cl.command_execution_status.COMPLETE
    while _inflight:
        try:
            if _inflight[0][0].command_execution_status != done:
                break
        except cl.Error:
            pass
        _inflight.popleft()
    _inflight.append((evt, refs))


def _simulator(rt):
    """Oclgrind's interpreter cannot create a kernel that inlined ``restrict`` pointers or calls clang's
    ``__builtin_sqrtf`` (it has no ``llvm.experimental.noalias.scope.decl`` nor ``llvm.sqrt``), so the
    template leaves both out there (``simulator=True``)."""
    return "oclgrind" in rt.info.platform.lower()


def kernel_for(rt, algo, flags, dtype, slots=None, elems=None, split_barrier=None):
    """(kernel, local size, elems, slots, n_states, n_scalars) for one signature on runtime ``rt`` (cached)."""
    key = (rt.index, algo, tuple(sorted(flags.items())), dtype.cl, slots, elems, split_barrier)
    entry = _kernels.get(key)
    if entry is not None:
        return entry
    f = _full_flags(flags)
    states = ALGOS[algo][0](f)
    scalars = ALGOS[algo][1]
    prof = rt.profile
    ls = int(prof.get_value("optim", "local_size", prof.get_value("elementwise", "local_size", 64)))
    if elems is None:
        elems = int(prof.get_value("optim", "elems_per_item", 1))
    if slots is None:
        slots = int(prof.get_value("optim", "slots", DEFAULT_SLOTS))
    # CPU devices (PoCL) form their work-item loops between barriers; see the template's split_barrier.
    if split_barrier is None:
        split_barrier = bool(prof.get_value("optim", "split_barrier", rt.info.cls == "cpu"))
    sdt = np.float64 if dtype.cl == "double" else np.float32
    argd = []
    for s in range(slots):
        argd += [None, np.int64, None, np.int64]
        argd += [None, np.int64] * len(states)
        argd += [np.int64]
        if s > 0:
            argd += [np.int32]
    argd += [sdt] * len(scalars) + [np.int32]
    k = rt.kernel("optim.cl.mako", "optim_step", argd, algo=algo, flags=f, states=tuple(states),
                  scalars=tuple(scalars), st=dtype.cl, ct=dtype.cl, slots=slots, elems=elems,
                  split_barrier=split_barrier, **({"simulator": True} if _simulator(rt) else {}))
    ls = geometry.local1(rt, ls, k)       # fitted to the device's and the kernel's limits
    entry = (k, ls, elems, slots, len(states), len(scalars))
    _kernels[key] = entry
    return entry


def fusable(p, g, states):
    """True when the fused kernel can update ``p`` in place: same device and floating dtype (32/64-bit)
    for all, every tensor contiguous."""
    dt = p.dtype
    if dt.cl not in ("float", "double"):
        return False
    dev = p.device
    for t in (p, g, *states):
        if t.dtype is not dt or not t.is_contiguous() or (t.device is not dev and t.device != dev):
            return False
    return True


def fused_step(algo, flags, params, grads, states, scalars, slots=None, elems=None, split_barrier=None):
    """Update ``params`` (and their ``states``) in place with one kernel launch per ``slots`` tensors.

    params, grads: lists of same-device, same-dtype contiguous tensors; states: one list of state tensors
    per parameter, ordered as :func:`state_names`; scalars: the algorithm's scalar values, ordered as
    ``ALGOS[algo][1]``. Empty parameters are skipped. slots, elems, split_barrier override the device
    profile's choice (benchmarks and tests use them). Returns the number of launches.
    """
    items = [(p, g, st) for p, g, st in zip(params, grads, states) if p.numel() > 0]
    if not items:
        return 0
    p0 = items[0][0]
    rt = p0._runtime()
    k, ls, el, nslots, nst, nsc = kernel_for(rt, algo, flags, p0.dtype, slots, elems, split_barrier)
    if len(scalars) != nsc:
        raise ValueError(f"{algo}: expected {nsc} scalars, got {len(scalars)}")
    tail = [float(x) for x in scalars] + [0]
    per_group = ls * el
    if split_barrier is None:
        split_barrier = bool(rt.profile.get_value("optim", "split_barrier", rt.info.cls == "cpu"))
    if split_barrier and nslots > 2:
        # PoCL 3 miscompiles the bounds check `i < n` in the split-barrier kernel with 3 or more slots: it
        # evaluates it once per work-group (measured: a partial last group writes past the tensor). So that
        # kernel gets only whole work-groups, and the tails (< one group per tensor) go to the kernel
        # without the barrier, which checks bounds correctly.
        whole, tails = [], []
        for p, g, st in items:
            n = p.numel()
            full = n - n % per_group
            if full:
                whole.append((p, g, st, 0, full))
            if full != n:
                tails.append((p, g, st, full, n - full))
        kt = kernel_for(rt, algo, flags, p0.dtype, nslots, el, False)[0]
        launches = _launch(rt, k, ls, per_group, nslots, nst, whole, tail)
        launches += _launch(rt, kt, ls, per_group, nslots, nst, tails, tail)
    else:
        launches = _launch(rt, k, ls, per_group, nslots, nst, [(p, g, st, 0, p.numel()) for p, g, st in items],
                           tail)
    for p, g, st in items:
        p._storage.version += 1
        for t in st:
            t._storage.version += 1
    if p0._storage.host is not None:
        rt.finish_if_exposed()   # waits only for memory numpy shares (Runtime.finish_if_exposed)
    return launches


def _launch(rt, k, ls, per_group, nslots, nst, segs, tail):
    """Enqueue ``k`` over ``segs`` = [(param, grad, states, first element, count)], ``nslots`` per launch."""
    launches = 0
    for c in range(0, len(segs), nslots):
        chunk = segs[c:c + nslots]
        starts = []
        total = 0
        for seg in chunk:
            starts.append(total)
            total += (seg[4] + per_group - 1) // per_group
        args = []
        for s in range(nslots):
            if s < len(chunk):
                p, g, st, off, cnt = chunk[s]
                args += [p._storage.cl_buffer(), p._offset + off, g._storage.cl_buffer(), g._offset + off]
                for t in st:
                    args += [t._storage.cl_buffer(), t._offset + off]
                args.append(cnt)
                if s > 0:
                    args.append(starts[s])
            else:
                # unused slot: no elements, starts past the last work-group; its buffers are a tiny scratch
                # buffer (never touched), so no real buffer is passed twice
                d = _dummy(rt)
                args += [d, 0, d, 0] + [d, 0] * nst + [0, total]
        evt = rt.launch(k, (total * ls,), (ls,), *args, *tail)
        launches += 1
        if any(seg[0]._storage.host is not None or seg[1]._storage.host is not None for seg in chunk):
            _retain(evt, chunk)
    return launches


# ---------------------------------------------------------------------- what a recorded launch holds
def launch_layout(kernel):
    """``(slots, n_states, n_scalars)`` when ``kernel`` is the fused step kernel (made by :func:`kernel_for`),
    else None. Its arguments are, per slot, ``param, offset, grad, offset, (state, offset) * n_states, count``
    (and the slot's first work-group from the second slot on), then the ``n_scalars`` scalars and one int."""
    src = getattr(kernel, "_cltorch_src", None)
    if src is None or src[0] != "optim.cl.mako":
        return None
    p = src[2]
    return p["slots"], len(p["states"]), len(p["scalars"])


def launch_params(args, layout):
    """The parameter buffers that a fused step launch with arguments ``args`` updates, slot by slot (unused
    slots, whose count is 0, left out)."""
    slots, nst, _ = layout
    out, j = [], 0
    for s in range(slots):
        if args[j + 4 + 2 * nst]:
            out.append(args[j])
        j += 5 + 2 * nst + (s > 0)
    return out
