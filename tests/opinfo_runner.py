"""Runs PyTorch's OpInfo database (``op_db``) against cltorch: the measure of our op surface.

Each OpInfo entry names an op and yields float32 sample inputs. For every sample we run torch and cltorch (on
one device) and compare: values (rtol 1e-4, atol 1e-5, NaN equal to NaN), shapes, dtypes, and "both raise".
For entries with ``supports_autograd`` a gradient pass compares the gradients of every floating input that
requires grad, after a backward of ``sum(out * w)`` with the same fixed weights ``w`` on both sides. Random
ops (``nondeterministic`` entries) compare shapes and dtypes only.

Used by ``tests/test_opinfo.py`` (the regression ratchet) and ``tools/opinfo_report.py`` (``docs/OPS.md``).
torch is the oracle and a test-only dependency.
"""
import math

import numpy as np

import cltorch

MAX_SAMPLES = 8
RTOL, ATOL = 1e-4, 1e-5

# Namespaces and entries we decide not to support, each with the reason. A prefix ends with '.'.
SKIP = {
    "_refs.": "torch's Python reference implementations, not user API",
    "sparse.": "sparse layouts are not provided",
    "masked.": "torch.masked (masked tensors) is a prototype API, not provided",
    "signal.windows.": "window functions of torch.signal are not provided",
    "to_sparse": "sparse layouts are not provided",
    "_": "private aten ops (names starting with '_') are not user API",
    "torch.ops.aten._": "private aten ops (names starting with '_') are not user API",
    "torch._scaled_mm": "private aten ops (names starting with '_') are not user API",
    "nn.functional.quantized": "quantized ops are not provided",
    "fake_quantize_per_tensor_affine": "quantization is not provided",
    "fake_quantize_per_channel_affine": "quantization is not provided",
    "jiterator_": "CUDA's jiterator is CUDA-only",
}


# The entries torch 2.13's OpInfo marks ``has_nondeterministic_output`` (uninitialized memory, attention kernels
# whose extra outputs are random): their values are not compared. Older torch's OpInfo has no such attribute (it
# only skips these entries' comparisons in its own test classes), so the runner falls back to this list.
NONDETERMINISTIC_OUTPUT = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "torch.ops.aten._flash_attention_forward", "torch.ops.aten._efficient_attention_forward"})


def nondeterministic_output(op):
    """True when the entry's output values are not reproducible (compare shapes and dtypes only)."""
    flag = getattr(op, "has_nondeterministic_output", None)
    return entry_id(op) in NONDETERMINISTIC_OUTPUT if flag is None else bool(flag)


def skip_reason(op):
    name = op.name
    for key, why in SKIP.items():
        if key.endswith(".") or key == "_" or key.endswith("_"):
            if name.startswith(key):
                return why
        elif name == key or name.startswith(key):
            return why
    return None


def entry_id(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def namespace(op):
    parts = op.name.split(".")
    if parts[0] in ("linalg", "fft", "special", "nn", "masked", "signal", "sparse"):
        return ".".join(parts[:2]) if parts[0] == "nn" else parts[0]
    return "torch"


class Missing(Exception):
    """The entry reaches a cltorch name that does not exist."""


def _cl_module_for(mod):
    """The cltorch module mirroring torch module ``mod`` (torch.nn.functional -> cltorch.nn.functional)."""
    import importlib
    name = getattr(mod, "__name__", "")
    if name != "torch" and not name.startswith("torch."):
        return None
    try:
        return importlib.import_module("cltorch" + name[len("torch"):])
    except ImportError:
        return None


def _rebind(fn):
    """A copy of the Python function ``fn`` (an OpInfo's wrapper lambda, e.g. ``lambda self, cond, other:
    torch.where(cond, self, other)``) whose global torch modules are cltorch's."""
    import types
    g = dict(fn.__globals__)
    for k, v in fn.__globals__.items():
        if isinstance(v, types.ModuleType):
            cl = _cl_module_for(v)
            if cl is not None:
                g[k] = cl
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


def resolve(op):
    """The cltorch callable for an entry, or None.

    An entry whose op is a Python wrapper (a lambda over torch functions) runs that wrapper with cltorch in
    place of torch; otherwise the op is looked up by its dotted name in cltorch, then as a Tensor method of
    that name when torch's entry has a method variant."""
    import inspect
    import torch
    if inspect.isfunction(op.op) and op.op.__module__.startswith("torch.testing"):
        return _rebind(op.op)
    if isinstance(op.op, torch._ops.OpOverload):       # aten.slice.Tensor -> cltorch.ops.aten.slice.Tensor
        packet = getattr(cltorch.ops.aten, op.op._schema.name.split("::")[-1], None)
        return getattr(packet, op.op._overloadname, None)
    obj = cltorch
    for part in op.name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is not None and callable(obj):
        return obj
    if "." not in op.name and op.method_variant is not None and hasattr(cltorch.Tensor, op.name):
        name = op.name
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    return None


def _is_random(op, s):
    """True when torch's own output depends on the seed (random ops compare shapes and dtypes only)."""
    import inspect
    import torch
    if inspect.isfunction(op.op) and "wrapper_set_seed" in op.op.__code__.co_names:
        return True          # OpInfo's own marker of a seeded random op
    try:
        outs = []
        for seed in (0, 1):
            torch.manual_seed(seed)
            with torch.no_grad():
                outs.append([_np(o).copy() for o in _flatten(op.op(s.input, *s.args, **s.kwargs))
                             if isinstance(o, torch.Tensor)])
        return any(a.shape != b.shape or not np.array_equal(a, b, equal_nan=True) for a, b in zip(*outs))
    except Exception:  # noqa: BLE001
        return False


def _dtype_to_cl(d):
    import torch
    if isinstance(d, torch.dtype):
        name = str(d).split(".")[1]
        got = getattr(cltorch, name, None)
        if got is None:
            raise NotImplementedError(f"cltorch has no dtype {name}")
        return got
    return d


def _is_partial_view(x):
    """A float view into a larger storage (as_strided.partial_views): its storage matters, not only its values."""
    return (x._base is not None and x.dtype.is_floating_point and not x.is_complex()
            and x.untyped_storage().nbytes() > x.numel() * x.element_size())


def _partial_view(x, device):
    """The same view (shape, strides, offset) of a cltorch copy of x's whole storage."""
    import torch
    n = x.untyped_storage().nbytes() // x.element_size()
    base = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,)).detach()
    b = cltorch.from_numpy(base.numpy().copy()).to(device)
    return b.as_strided(tuple(x.shape), tuple(x.stride()), x.storage_offset())


def to_cl(x, device, leaves):
    """torch objects in a sample -> cltorch objects on ``device``; tensors requiring grad are recorded in
    ``leaves`` as (torch tensor, cltorch tensor)."""
    import torch
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise NotImplementedError(f"sample has a {x.dtype} {x.layout} tensor")
        if _is_partial_view(x):
            t = _partial_view(x, device)
        else:
            arr = x.detach().cpu().resolve_conj().resolve_neg().numpy().copy()
            t = cltorch.from_numpy(arr).to(device) if arr.ndim else cltorch.tensor(arr, device=device)
        if x.dtype == torch.bool and t.dtype != cltorch.bool:
            t = t.to(cltorch.bool)
        if x.requires_grad:
            t.requires_grad_(True)
            leaves.append((x, t))
        return t
    if isinstance(x, torch.dtype):
        return _dtype_to_cl(x)
    if isinstance(x, torch.device):
        return cltorch.device(device)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)):
        seq = [to_cl(v, device, leaves) for v in x]
        return type(x)(seq) if not hasattr(x, "_fields") else type(x)(*seq)
    if isinstance(x, dict):
        return {k: to_cl(v, device, leaves) for k, v in x.items()}
    if isinstance(x, torch.memory_format):
        return getattr(cltorch, str(x).split(".")[-1])
    if isinstance(x, torch.layout):
        return getattr(cltorch, str(x).split(".")[-1], x)
    if isinstance(x, torch.Generator):
        raise NotImplementedError("sample passes a torch.Generator")
    return x


def _flatten(out):
    import torch
    if isinstance(out, (torch.Tensor, cltorch.Tensor)):
        return [out]
    if isinstance(out, (list, tuple)):
        res = []
        for o in out:
            res.extend(_flatten(o))
        return res
    return [out]


def _np(t):
    import torch
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().resolve_conj()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()   # numpy has no bfloat16
    if isinstance(t, cltorch.Tensor):
        t = t.detach().cpu()
        return np.asarray((t.float() if t.dtype == cltorch.bfloat16 else t).numpy())
    return np.asarray(t)


def _same_dtype(a, b):
    import torch
    if isinstance(a, torch.Tensor) and isinstance(b, cltorch.Tensor):
        return str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
    return True


def compare(ref, got, values=True):
    """None when ``got`` (cltorch) matches ``ref`` (torch), else a one-line description."""
    r, g = _flatten(ref), _flatten(got)
    if len(r) != len(g):
        return f"{len(g)} outputs, torch has {len(r)}"
    for i, (a, b) in enumerate(zip(r, g)):
        if a is None or b is None:
            if (a is None) != (b is None):
                return f"output {i}: {'None' if b is None else type(b).__name__} vs torch's {type(a).__name__}"
            continue
        if not _same_dtype(a, b):
            return f"output {i}: dtype {b.dtype} vs torch's {a.dtype}"
        na, nb = _np(a), _np(b)
        if na.shape != nb.shape:
            return f"output {i}: shape {tuple(nb.shape)} vs torch's {tuple(na.shape)}"
        if not values:
            continue
        if na.dtype.kind == "c":      # complex: compare the (re, im) pairs
            na, nb = np.stack([na.real, na.imag], -1), np.stack([nb.real, nb.imag], -1)
        if na.dtype.kind in "biu" or na.dtype == np.bool_:
            if not np.array_equal(na, nb):
                return f"output {i}: values differ"
            continue
        if not np.allclose(nb.astype(np.float64), na.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True):
            with np.errstate(invalid="ignore"):
                err = np.nanmax(np.abs(nb.astype(np.float64) - na.astype(np.float64))) if na.size else 0.0
            return f"output {i}: max abs difference {err:.3g}"
    return None


def samples(op, requires_grad):
    import torch
    try:
        it = op.sample_inputs("cpu", torch.float32, requires_grad=requires_grad)
        out = []
        for s in it:
            out.append(s)
            if len(out) >= MAX_SAMPLES:
                break
        return out
    except Exception as e:  # noqa: BLE001 - a sample generator that fails is torch's problem, recorded
        raise RuntimeError(f"torch's sample_inputs failed: {type(e).__name__}: {e}") from e


def _call(fn, s, device, leaves):
    inp = to_cl(s.input, device, leaves)
    args = to_cl(list(s.args), device, leaves)
    kwargs = to_cl(dict(s.kwargs), device, leaves)
    try:
        return fn(inp, *args, **kwargs)
    except AttributeError as e:
        mod = getattr(e, "obj", None)
        if getattr(mod, "__name__", "").startswith("cltorch"):
            raise Missing(str(e)) from e
        raise


def run_forward(op, fn, device, counts=None):
    """None when every sample matches torch, else the first mismatch (a one-line string).

    Every sample runs even after a mismatch; ``counts`` (a list [passed, run]) accumulates the sample figures."""
    import torch
    first = None
    for k, s in enumerate(samples(op, False)):
        values = not nondeterministic_output(op) and not _is_random(op, s)
        msg = _forward_sample(op, fn, device, k, s, values)
        if counts is not None:
            counts[0] += msg is None
            counts[1] += 1
        if msg is not None and first is None:
            first = msg
    return first


def _forward_sample(op, fn, device, k, s, values):
    """None when sample ``k`` matches torch, else what differs."""
    import torch
    try:
        with torch.no_grad():
            ref = op.op(s.input, *s.args, **s.kwargs)
        ref_err = None
    except Exception as e:  # noqa: BLE001
        ref, ref_err = None, e
    try:
        got = _call(fn, s, device, [])
        got_err = None
    except Missing:
        raise
    except Exception as e:  # noqa: BLE001
        got, got_err = None, e
    if ref_err is not None or got_err is not None:
        if ref_err is not None and got_err is not None:
            return None
        if got_err is not None:
            return f"sample {k}: raised {type(got_err).__name__}: {got_err}"[:300]
        return f"sample {k}: torch raises {type(ref_err).__name__}, cltorch does not"[:300]
    msg = compare(ref, got, values=values)
    return f"sample {k}: {msg}" if msg else None


def run_gradient(op, fn, device, counts=None):
    """None when the gradients of every floating input match torch's, else the first mismatch.

    Every sample with something to differentiate runs; ``counts`` ([passed, run]) accumulates the figures."""
    if nondeterministic_output(op):
        return None
    first = None
    for k, s in enumerate(samples(op, True)):
        msg = _gradient_sample(op, fn, device, k, s)
        if msg is _NOTHING:
            continue
        if counts is not None:
            counts[0] += msg is None
            counts[1] += 1
        if msg is not None and first is None:
            first = msg
    return first


_NOTHING = object()   # a gradient sample with nothing to compare (torch raises, no differentiable output)


def _gradient_sample(op, fn, device, k, s):
    import torch
    if _is_random(op, s):
        return _NOTHING
    try:
        ref = op.op(s.input, *s.args, **s.kwargs)
    except Exception:  # noqa: BLE001 - torch raises: nothing to compare
        return _NOTHING
    # complex outputs enter the loss through view_as_real (a real cotangent per part, as torch's gradcheck)
    t_outs = [torch.view_as_real(o.resolve_conj()) if o.is_complex() else o for o in _flatten(ref)
              if isinstance(o, torch.Tensor) and o.requires_grad and (o.dtype.is_floating_point or o.is_complex())]
    t_leaves = [x for x in _flatten([s.input, list(s.args), list(s.kwargs.values())])
                if isinstance(x, torch.Tensor) and x.requires_grad]
    if not t_outs or not t_leaves:
        return _NOTHING
    rng = np.random.default_rng(k)
    weights = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in t_outs]
    loss = sum((o * torch.from_numpy(w)).sum() for o, w in zip(t_outs, weights))
    t_grads = torch.autograd.grad(loss, t_leaves, allow_unused=True)
    t_grads = [torch.zeros_like(g) if g is not None and g._is_zerotensor() else g for g in t_grads]
    leaves = []
    try:
        got = _call(fn, s, device, leaves)
        c_outs = [cltorch.view_as_real(o) if o.is_complex() else o for o in _flatten(got)
                  if isinstance(o, cltorch.Tensor) and o.requires_grad and (o.dtype.is_floating_point or o.is_complex())]
        if len(c_outs) != len(t_outs):
            return f"sample {k}: {len(c_outs)} differentiable outputs, torch has {len(t_outs)}"
        c_loss = sum((o * cltorch.from_numpy(w).to(o.device)).sum() for o, w in zip(c_outs, weights))
        by_id = {id(tx): cx for tx, cx in leaves}
        c_leaves = [by_id[id(x)] for x in t_leaves if id(x) in by_id]
        if len(c_leaves) != len(t_leaves):
            return f"sample {k}: inputs requiring grad were not passed through"
        c_grads = cltorch.autograd.grad(c_loss, c_leaves, allow_unused=True)
    except Missing:
        raise
    except Exception as e:  # noqa: BLE001
        return f"sample {k}: backward raised {type(e).__name__}: {e}"[:300]
    for i, (tg, cg) in enumerate(zip(t_grads, c_grads)):
        if tg is None and cg is None:
            continue
        if tg is None:
            tg = torch.zeros_like(t_leaves[i])
        if cg is None:
            cg = cltorch.zeros(tuple(tg.shape))
        msg = compare(tg, cg)
        if msg:
            return f"sample {k}: grad of input {i}: {msg}"
    return None


def _first_failure(run, op, fn, devices, counts=None):
    """The first device's first mismatch ("device: what"), or None; every device runs every sample, and
    ``counts`` (a dict device -> [passed, run]) receives the sample figures."""
    first = None
    for d in devices:
        c = [0, 0]
        msg = run(op, fn, d, c)
        if counts is not None:
            counts[d] = c
        if msg is not None and first is None:
            first = f"{d}: {msg}"
    return first


def sweep(devices=("cpu",), entries=None, progress=None):
    """Every entry's result over ``devices``: a dict id -> {namespace, status, forward, gradient, reason}.

    status is 'skipped' (in SKIP, with the reason), 'missing' (no cltorch counterpart) or 'run'; forward and
    gradient are None (passed on every device), 'n/a', or the first mismatch ("device: what").
    ``samples`` holds the sample figures of a run entry: {'forward': {device: [passed, run]}, 'gradient': ...};
    an entry that fails before its samples run (an unsupported dtype, say) counts all its samples as failed."""
    from torch.testing._internal.common_methods_invocations import op_db
    results = {}
    for op in op_db:
        eid = entry_id(op)
        if entries is not None and eid not in entries:
            continue
        if progress:
            progress(eid)
        rec = {"namespace": namespace(op), "status": "run", "forward": None, "gradient": "n/a", "reason": None,
               "samples": {"forward": {}, "gradient": {}}}
        why = skip_reason(op)
        fn = None if why else resolve(op)
        if why:
            rec.update(status="skipped", reason=why, forward="n/a")
        elif fn is None:
            rec.update(status="missing", forward="n/a")
        else:
            counts = rec["samples"]
            phase = "forward"
            try:
                rec["forward"] = _first_failure(run_forward, op, fn, devices, counts["forward"])
                if op.supports_autograd:
                    phase = "gradient"
                    rec["gradient"] = _first_failure(run_gradient, op, fn, devices, counts["gradient"])
            except Missing as e:
                rec.update(status="missing", forward="n/a", gradient="n/a", reason=str(e))
            except Exception as e:  # noqa: BLE001
                rec[phase] = f"{type(e).__name__}: {e}"[:300]
                try:
                    n = len(samples(op, phase == "gradient"))
                except Exception:  # noqa: BLE001 - torch's own sample generator fails: nothing to count
                    n = 0
                counts[phase] = {d: [0, n] for d in devices}
        if rec["status"] != "run":
            rec.pop("samples")
        results[eid] = rec
    return results
