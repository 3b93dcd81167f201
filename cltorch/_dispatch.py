"""The op registry, grad-mode state, and the dispatcher through which Tensor methods reach ops.

An op is registered once with its forward and its derivative (:class:`Op`). Calling it through
:func:`call` runs the forward with gradient recording off, then, if grad mode is on and a tensor
input requires grad, hands the op, its context and its inputs to the recorder that
``cltorch.autograd`` installs (``set_recorder``). So this floor knows nothing of the graph, and
autograd knows ops only through this registry.
"""
import functools
import threading

__all__ = ["Op", "register", "REGISTRY", "call", "is_grad_enabled", "set_grad_enabled_raw",
           "is_inference_mode_enabled", "Ctx"]

REGISTRY = {}


class _GradState(threading.local):
    def __init__(self):
        self.enabled = True
        self.inference = False
        self.ac = None               # autocast: None, or {device_type: (dtype, cache dict or None)} while enabled


_state = _GradState()


def is_grad_enabled():
    return _state.enabled


def set_grad_enabled_raw(mode):
    prev = _state.enabled
    _state.enabled = bool(mode)
    return prev


def is_inference_mode_enabled():
    return _state.inference


def set_inference_raw(mode):
    prev = _state.inference
    _state.inference = bool(mode)
    return prev


class Ctx:
    """Per-call context: what the forward keeps for the backward.

    ``save_for_backward(*tensors)`` records each tensor with its storage version, and
    ``saved_tensors`` checks the versions, raising PyTorch's "modified by an inplace operation" error.
    Other values are kept as plain attributes.
    """

    __slots__ = ("_saved", "_versions", "op_name", "needs_input_grad", "saved_outputs", "__dict__")

    def __init__(self, op_name=""):
        self._saved = ()
        self._versions = ()
        self.op_name = op_name
        self.needs_input_grad = ()
        self.saved_outputs = None     # ((index in _saved, output_nr), ...): outputs kept without their node (autograd)

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._versions = tuple([t._storage.version if t is not None else 0 for t in tensors])

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved "
                               "tensors after they have already been freed). Saved intermediate values of the "
                               "graph are freed when you call .backward() or autograd.grad(). Specify "
                               "retain_graph=True if you need to backward through the graph a second time.")
        for t, v in zip(saved, self._versions):
            if t is not None and t._storage.version != v:
                i = next(j for j, s in enumerate(saved) if s is t)
                node = "".join(p.capitalize() for p in self.op_name.strip("_").split("_")) + "Backward0"
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.dtype.name} tensor of shape {list(t.shape)}], which is output/input {i} "
                    f"of {node}, is at version {t._storage.version}; expected version {v} "
                    "instead. Hint: the backtrace further above can point at the operation that failed to "
                    "compute its gradient.")
        return saved

    def free(self):
        self._saved = None


class Op:
    """A registered op: ``forward(ctx, *args, **kw)`` computes outputs (a Tensor or a tuple of them)
    without recording; ``backward(ctx, *grad_outputs)`` returns one gradient per positional argument
    (None where not differentiable), written with differentiable tensor ops so that
    ``create_graph=True`` gives higher-order gradients. ``backward=None`` marks a non-differentiable op.
    """

    __slots__ = ("name", "forward", "backward", "differentiable_outputs", "doc", "widen")

    def __init__(self, name, forward, backward=None, differentiable_outputs=None, doc=None):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.differentiable_outputs = differentiable_outputs   # None: all floating outputs
        self.doc = doc
        self.widen = WIDEN.get(name)   # 16-bit inputs computed in float32 (see _widened)

    def __repr__(self):
        return f"Op({self.name})"


def register(name, forward, backward=None, **kw):
    """Register an op under ``name``; returns the Op. Re-registering a name raises."""
    if name in REGISTRY:
        raise ValueError(f"op '{name}' is registered twice")
    op = Op(name, forward, backward, **kw)
    REGISTRY[name] = op
    return op


_recorder = [None]


def set_recorder(fn):
    _recorder[0] = fn


def _needs_grad(args):
    # Tensor's slot, not its ``requires_grad`` property (a third of this function's time)
    for a in args:
        if a.__class__ in _SCALARS:
            continue
        if getattr(a, "_requires_grad", False):
            return True
        if a.__class__ in (list, tuple):
            for b in a:
                if getattr(b, "_requires_grad", False):
                    return True
    return False


_SCALARS = frozenset((int, float, bool, type(None), str))


def call(op, *args, **kw):
    """Run a registered op; record it for autograd when grad mode is on and an input requires grad.

    Two hooks come first, both off the default path: inside an enabled autocast region, an op named in
    ``AUTOCAST_OPS`` gets its floating inputs cast by its policy (and runs with autocast off, as PyTorch
    redispatches below its autocast key); an op named in ``WIDEN`` whose kernels have no 16-bit arithmetic runs on
    float32 copies of its bfloat16 (and, where the device lacks cl_khr_fp16, float16) inputs."""
    if _state.ac is not None:
        r = _autocast_call(op, args, kw)
        if r is not _NO:
            return r
    if op.widen is not None:
        r = _widened(op, args, kw)
        if r is not _NO:
            return r
    return _call(op, args, kw)


def _call(op, args, kw):
    if _state.enabled and op.backward is not None and _needs_grad(args):
        ctx = Ctx(op.name)
        prev = _state.enabled
        _state.enabled = False
        try:
            out = op.forward(ctx, *args, **kw)
        finally:
            _state.enabled = prev
        return _recorder[0](op, ctx, args, out)
    return op.forward(None, *args, **kw)


# ------------------------------------------------------------------------------------------------ 16-bit widening
# Ops whose kernels compute float32/float64 only. "all": bfloat16 inputs always, float16 inputs on devices without
# cl_khr_fp16; "bf16": bfloat16 only (their kernels read and write half themselves with vload_half /
# vstore_half_rte; mm is not listed: the GEMM reads and writes bfloat16 too, accumulating in float32);
# "any16": bfloat16 and float16 on every device (the recurrent kernels have no half variant).
# (scaled_dot_product_flash_attention is not listed: its GPU design reads and writes float16 and bfloat16 itself,
# and its CPU design is never called with them: ops/attention/plan.py sends them to the math path.)
# Such an op runs on float32 copies (differentiable casts) and its floating outputs are rounded back to the 16-bit
# dtype: float32 accumulation, 16-bit in and out, as PyTorch computes half and bfloat16 on CPUs.
WIDEN = {n: "all" for n in (
    "sum", "mean", "prod", "amax", "amin", "max_dim", "min_dim", "cumsum", "cumprod", "cummax", "cummin",
    "softmax", "cross_entropy", "cross_entropy_prob",
    "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "linalg_vector_norm", "sort",
    "avg_pool2d", "avg_pool2d_backward")}
# the norms too: their half path mixes float16 input with float32 weights wrongly (batch_norm under autocast on
# Intel's runtime was off by 4 where float32 copies agree to 4e-3)
WIDEN.update((n, "any16") for n in ("rnn_layer", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "layer_norm",
                                    "group_norm", "batch_norm"))
WIDEN.update((n, "bf16") for n in ("convolution", "convolution_transpose", "convolution_weight",
                                    "convolution_weight_bias", "max_pool2d_with_indices", "max_pool2d_gather",
                                    "max_pool2d_scatter", "resample1d", "resample1d_backward"))

_NO = object()
_FP16_OK = {}


def _fp16_native(dev):
    ok = _FP16_OK.get(dev)
    if ok is None:
        from . import backend
        if dev.type == "cpu" and not backend.cpu_device_present():
            ok = _FP16_OK[dev] = False         # no OpenCL CPU device: its arithmetic raises when it launches
            return ok
        rt = backend.cpu_runtime() if dev.type == "cpu" else backend.runtime(dev.index)
        ok = _FP16_OK[dev] = bool(rt.info.fp16)
    return ok


def _tensors(args):
    from ._tensor import Tensor
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif a.__class__ in (list, tuple):
            for b in a:
                if isinstance(b, Tensor):
                    yield b


_LOW16 = []


def _widened(op, args, kw):
    if not _LOW16:
        from . import _dtype
        _LOW16.extend((_dtype.float16, _dtype.bfloat16))
    f16, bf16 = _LOW16
    for a in args:       # the common case first: no 16-bit tensor among the positional arguments
        d = getattr(a, "dtype", None)
        if d is f16 or d is bf16 or a.__class__ in (list, tuple):
            break
    else:
        return _NO
    from . import _dtype as D
    low = None
    for t in _tensors(args):
        d = t.dtype
        if d is D.bfloat16 or (d is D.float16 and (op.widen == "any16" or
                                                   (op.widen == "all" and not _fp16_native(t.device)))):
            low = d
            break
    if low is None:
        return _NO
    explicit = [v for v in list(args) + list(kw.values()) if isinstance(v, D.dtype)]
    if explicit:      # an explicit 16-bit result dtype: computed as float32, rounded to it at the end
        low = explicit[0] if explicit[0] in (D.float16, D.bfloat16) else None
        kw = {k: (D.float32 if v is D.float16 or v is D.bfloat16 else v) for k, v in kw.items()}
    pairs = []

    def up(a):
        if a is D.float16 or a is D.bfloat16:
            return D.float32
        if a.__class__ in (list, tuple):
            return a.__class__(up(b) for b in a)
        d = getattr(a, "dtype", None)
        if (d is D.bfloat16 or d is D.float16) and hasattr(a, "_storage"):
            w = a.float()
            pairs.append((a, w, w._storage.version))
            return w
        return a
    new = tuple(up(a) for a in args)
    out = _call(op, new, kw)
    prev = set_grad_enabled_raw(False)
    try:     # in-place updates of widened inputs (running statistics) land in the originals
        for a, w, v in pairs:
            if w._storage.version != v:
                a.copy_(w)
    finally:
        set_grad_enabled_raw(prev)
    if low is None:
        return out

    def down(o):
        if getattr(o, "dtype", None) is D.float32 and hasattr(o, "_storage"):
            return o.to(low)
        return o
    if isinstance(out, tuple):
        return out.__class__(down(o) for o in out) if not hasattr(out, "_fields") else out.__class__(*map(down, out))
    return down(out)


# ------------------------------------------------------------------------------------------------ autocast
# PyTorch's autocast policies per device type, by registered op name (ops reached through a registered op) and by
# public function name (composites such as linear or mse_loss, wrapped where they are defined: cltorch.ops.
# _autocast). "lower": floating inputs (not float64) cast to the region's dtype; "fp32": 16-bit floating inputs
# cast to float32; "fp32_opt": as fp32 unless the call gives an explicit dtype; "promote": floating inputs cast to
# their widest floating dtype. "cpu" follows torch's CPU lists (aten/src/ATen/autocast_mode.cpp), "cl" its CUDA
# lists (a GPU-style device; tests/test_autocast_cl.py holds it to torch's own CUDA test lists). Ops named nowhere
# run in their inputs' dtypes. torch's linalg_vecdot and linalg_multi_dot are the functions vecdot and multi_dot.
_LOWER_COMMON = ("mm", "convolution", "convolution_transpose", "scaled_dot_product_flash_attention",
                 "matmul", "bmm", "addmm", "baddbmm", "addbmm", "linear", "conv1d", "conv2d", "conv3d",
                 "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention")
_CPU_FP32 = ("binary_cross_entropy", "binary_cross_entropy_with_logits", "prod", "mse_loss", "nll_loss",
             "cross_entropy", "cross_entropy_prob", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
             "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "poisson_nll_loss",
             "cosine_embedding_loss", "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
             "cholesky_solve", "inverse", "pinverse", "trace", "cdist", "quantile", "nanquantile", "polar",
             "view_as_complex", "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "linalg_det", "linalg_slogdet",
             "linalg_eig", "linalg_eigh", "linalg_svd", "linalg_qr", "linalg_lstsq", "linalg_pinv",
             "linalg_solve_matrix", "linalg_cholesky_ex", "linalg_lu_factor_ex", "linalg_solve_triangular",
             "matrix_exp", "geqrf", "fft_c2c", "rfft_last")
_CL_FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
            "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "nll_loss", "cross_entropy",
            "cross_entropy_prob", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
            "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "poisson_nll_loss",
            "cosine_embedding_loss", "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
            "binary_cross_entropy_with_logits", "cdist", "logsumexp", "cosine_similarity", "linalg_vector_norm",
            "norm", "rms_norm")
_CL_FP32_OPT = ("softmax", "log_softmax", "sum", "prod", "cumsum", "cumprod")
AUTOCAST_OPS = {
    "cpu": dict([(n, "lower") for n in _LOWER_COMMON + ("prelu", "_thnn_fused_lstm_cell", "rnn_layer", "vecdot")]
                + [(n, "fp32") for n in _CPU_FP32] + [(n, "promote") for n in ("cat", "stack", "index_copy")]),
    "cl": dict([(n, "lower") for n in _LOWER_COMMON + ("prelu", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
                                                       "rnn_layer", "lstm_cell", "gru_cell", "rnn_tanh_cell",
                                                       "rnn_relu_cell", "addmv", "addr", "mv", "einsum",
                                                       "chain_matmul", "vecdot", "multi_dot")]
               + [(n, "fp32") for n in _CL_FP32] + [(n, "fp32_opt") for n in _CL_FP32_OPT]
               + [(n, "promote") for n in ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "index_put",
                                           "scatter_add", "tensordot", "cat", "stack", "index_copy")]),
}
# PyTorch raises for these inside a CUDA-style autocast region (unsafe in low precision)
AUTOCAST_BANNED = {"cl": {"binary_cross_entropy": (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\nMany models use a "
    "sigmoid layer right before the binary cross entropy layer.\nIn this case, combine the two layers using "
    "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  "
    "binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.")}}


def autocast_state():
    """The thread's autocast regions: None, or {device_type: (dtype, cache)}."""
    return _state.ac


def set_autocast_state(st):
    prev = _state.ac
    _state.ac = st
    return prev


def _device_type(args, kw):
    from ._tensor import Tensor
    for a in list(args) + list(kw.values()):
        if isinstance(a, Tensor):
            return a.device.type
        if a.__class__ in (list, tuple):
            for b in a:
                if isinstance(b, Tensor):
                    return b.device.type
    return None


def _ac_cast(a, to, cache):
    """``a`` cast to ``to`` when it is a floating (non-float64) tensor of another dtype; leaves that require grad
    are cast once per region when ``cache`` is a dict (PyTorch's weight cast cache)."""
    from ._tensor import Tensor
    from . import _dtype as D
    if isinstance(a, Tensor):
        d = a.dtype
        if d is to or not d.is_floating_point or d is D.float64:
            return a
        if cache is not None and a.requires_grad and a.is_leaf:
            hit = cache.get(id(a))
            if hit is not None and hit[0] is a:
                return hit[1]
            c = a.to(to)
            cache[id(a)] = (a, c)
            return c
        return a.to(to)
    if a.__class__ in (list, tuple):
        return a.__class__(_ac_cast(b, to, cache) for b in a)
    return a


def autocast_args(policy, device_type, args, kw):
    """``(args, kw)`` cast by ``policy`` for the enabled region of ``device_type`` (see AUTOCAST_OPS)."""
    from . import _dtype as D
    dtype, cache = _state.ac[device_type]
    if policy == "lower":
        to = dtype
    elif policy == "fp32" or policy == "fp32_opt":
        if policy == "fp32_opt" and (kw.get("dtype") is not None or any(isinstance(a, D.dtype) for a in args)):
            return args, kw
        to = D.float32
        lows = [t for t in _tensors(list(args) + list(kw.values()))
                if t.dtype is D.float16 or t.dtype is D.bfloat16]
        if not lows:
            return args, kw
        cache = None
    else:   # promote
        fl = [t.dtype for t in _tensors(list(args) + list(kw.values())) if t.dtype.is_floating_point]
        if len(set(fl)) < 2:
            return args, kw
        to = fl[0]
        for d in fl[1:]:
            to = D.promote_types(to, d)
        cache = None
    if policy == "fp32" or policy == "fp32_opt":
        def cast(a):
            if a.__class__ in (list, tuple):
                return a.__class__(cast(b) for b in a)
            d = getattr(a, "dtype", None)
            return a.float() if (d is D.float16 or d is D.bfloat16) and hasattr(a, "_storage") else a
    else:
        def cast(a):
            return _ac_cast(a, to, cache)
    return tuple(cast(a) for a in args), {k: (v if k == "out" else cast(v)) for k, v in kw.items()}


def autocast_policy(device_type, name):
    """The policy of ``name`` in the enabled region of ``device_type``, or None."""
    ac = _state.ac
    if ac is None or device_type not in ac:
        return None
    ban = AUTOCAST_BANNED.get(device_type, {}).get(name)
    if ban is not None:
        raise RuntimeError(ban)
    return AUTOCAST_OPS[device_type].get(name)


def _autocast_call(op, args, kw):
    dt = _device_type(args, kw)
    pol = autocast_policy(dt, op.name) if dt is not None else None
    if pol is None:
        return _NO
    args, kw = autocast_args(pol, dt, args, kw)
    prev = _state.ac
    _state.ac = None
    try:
        return call(op, *args, **kw)
    finally:
        _state.ac = prev


from . import _storage as _storage_mod  # noqa: E402  (a lower floor: Storage records inference mode)
# the thread's flag read without a Python frame (every new Storage asks)
_storage_mod._inference_probe[0] = functools.partial(getattr, _state, "inference")
