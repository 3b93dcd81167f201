"""scaled_dot_product_attention with PyTorch 2.13's semantics: the fused op (two designs, chosen by the device
profile) and the composed "math" path, plus ``SDPBackend`` and the ``sdpa_kernel`` context manager that chooses
between them.

Package layout: ``plan.py`` decides whether a fused design can run a call and which (``[sdpa] design``: "cpu"
or "flash"), with its tiles; ``cpu.py`` is the CPU design (register blocking, packed K/V,
``cl_kernels/sdpa.cl.mako``); ``flash.py`` and ``flash_backward.py`` the GPU design (FlashAttention-2's work
partitioning with local-memory tiles, ``cl_kernels/sdpa_flash.cl.mako``); ``dropout.py`` the in-kernel dropout's
Philox draw; ``layout.py`` how operands are read from their strides; ``composed.py`` the math path and the
gradients as ops (double backward). This module registers the fused op with its derivative.

Both fused designs keep no L x S matrix: an online softmax (running max and sum, accumulator rescaled when the
max grows) over key blocks, the row logsumexp saved for a backward that recomputes the attention weights in a
dQ pass (per query block) and a dK/dV pass (per key block), with no atomics (FlashAttention-2: Tri Dao, 2023;
online softmax: Milakov and Gimelshein, 2018).

Semantics (every path): query (..., L, E), key (..., S, E), value (..., S, Ev); a bool ``attn_mask`` marks the
pairs that take part (True), a float one is added to the scores; ``is_causal`` masks ``j > i`` (top-left aligned
when L != S) and combines with ``attn_mask``; a query row whose keys are all masked gives zeros and zero
gradients (torch 2.13). ``enable_gqa`` lets key/value have fewer heads (dim -3) than query, a divisor of them.

Dropout (``dropout_p > 0``) runs inside the fused kernels: each attention weight (bh, i, j) is kept with
probability 1 - p according to one word of the Philox4x32-10 stream of the default generator
(``cltorch.ops.random``; element index ``(bh * L + i) * S4 + j`` with S4 = S rounded up to 4), so the forward and
the backward kernels draw the same mask, both designs draw the same mask, a seed reproduces it on every device,
and the generator's offset advances by the blocks used. The math path draws its mask with ``Tensor.bernoulli_``;
it gives a different mask for the same seed (as PyTorch's backends do).

Dispatch: the fused op runs when FLASH_ATTENTION is enabled and the inputs fit (``plan.fused_config``: the CPU
design takes float32/float64 and head dims up to the profile's ``max_head_dim``; the flash design also float16
and bfloat16 storage, head dims up to ``flash_max_head_dim``, and hands larger float32/64 heads to the CPU
design; ``dropout_p < 1``, key/value batch dims equal to query's or grouped by ``enable_gqa``, the mask
broadcastable to (..., L, S) and not requiring grad); otherwise the math path when MATH is enabled (it also gives
a float mask its gradient); otherwise RuntimeError ("No available kernel").
"""
import contextlib
import enum
import math
import threading

from ... import _dtype as D
from ..._dispatch import call, register, is_grad_enabled
from ..._tensor import Tensor
from ..elementwise import common_device
from . import cpu, flash, flash_backward, mma
from .composed import composed_grads, math_attention
from .dropout import setup_dropout
from .plan import fused_config

__all__ = ["scaled_dot_product_attention", "SDPBackend", "sdpa_kernel"]


# ------------------------------------------------------------------------------------------ backend choice
class SDPBackend(enum.IntEnum):
    """The SDPA implementations, numbered as PyTorch's ``torch.nn.attention.SDPBackend``. cltorch has
    FLASH_ATTENTION (the fused kernel) and MATH; the others are accepted names without an implementation."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


class _State(threading.local):
    def __init__(self):
        self.enabled = (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH)


_state = _State()


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager restricting scaled_dot_product_attention to ``backends`` (one SDPBackend or a list), as
    ``torch.nn.attention.sdpa_kernel``. With ``set_priority=True`` the list order is the order tried (by default
    the fused kernel is tried first). Thread-local."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise ValueError(f"Invalid backend {b!r}: expected SDPBackend values")
    if not set_priority:
        order = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION,
                 SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE]
        backends = [b for b in order if b in backends]
    prev = _state.enabled
    _state.enabled = tuple(backends)
    try:
        yield
    finally:
        _state.enabled = prev


def _enabled_backends():
    return _state.enabled


# ---------------------------------------------------------------------------------------------- fused op
def _fused_fwd(ctx, q, k, v, mask, cfg):
    # the flash design's forward runs on a matrix unit where one is on and passed its probes (mma.py), else here
    res = mma.forward(q, k, v, mask, cfg) if cfg.design == "flash" else None
    out, lse = res if res is not None else (flash.forward if cfg.design == "flash" else cpu.forward)(q, k, v, mask, cfg)
    if ctx is not None:
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.cfg = cfg
    return out


def _fused_bwd(ctx, g):
    q, k, v, o, lse, mask = ctx.saved_tensors
    cfg = ctx.cfg
    needs = ctx.needs_input_grad
    if is_grad_enabled():
        dq, dk, dv = composed_grads(g, q, k, v, mask, cfg)
        return (dq if needs[0] else None), (dk if needs[1] else None), (dv if needs[2] else None), None, None
    bwd = flash_backward.backward if cfg.design == "flash" else cpu.backward
    dq, dk, dv = bwd(g, q, k, v, o, lse, mask, cfg, needs)
    return dq, dk, dv, None, None


_fused_op = register("scaled_dot_product_flash_attention", _fused_fwd, _fused_bwd)


# --------------------------------------------------------------------------------------------- entry point
def _check(query, key, value, attn_mask, dropout_p, enable_gqa):
    for t, nm in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{nm}' must be Tensor, not "
                            f"{type(t).__name__}")
        if t.dim() < 2:
            raise RuntimeError(f"scaled_dot_product_attention: {nm} must be at least 2-D, got shape "
                               f"{list(t._shape)}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} "
                           "instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention: expected floating point inputs, got {query.dtype.name}")
    common_device([query, key, value] + ([attn_mask] if attn_mask is not None else []))
    if query._shape[-1] != key._shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query's and key's last dims must match, got query "
                           f"{list(query._shape)} and key {list(key._shape)}")
    if key._shape[-2] != value._shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same sequence length "
                           f"(dim -2), got key {list(key._shape)} and value {list(value._shape)}")
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3:
        hq, hk, hv = query._shape[-3], key._shape[-3], value._shape[-3]
        if hk != hv or hq % hk != 0:
            raise RuntimeError(f"scaled_dot_product_attention with enable_gqa=True needs the query heads ({hq}) to "
                               f"be a multiple of the key/value heads ({hk}, {hv})")
    if attn_mask is not None and attn_mask.dtype is not D.bool and not attn_mask.dtype.is_floating_point:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, got "
                           f"{attn_mask.dtype.name}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """Attention ``softmax(query @ key^T * scale + bias) @ value`` as ``torch.nn.functional.
    scaled_dot_product_attention`` (PyTorch 2.13 semantics).

    query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev), same dtype. attn_mask broadcastable to
    (..., L, S): bool (True = the pair takes part) or float (added to the scores). dropout_p: dropout on the
    attention weights (in the fused kernel, from the default Philox generator). is_causal: mask the pairs j > i
    (top-left aligned when L != S), combined with attn_mask. scale: defaults to 1/sqrt(E). enable_gqa: key/value
    may have H/k heads for query's H (dim -3). A query row with every key masked gives zeros (and zero gradients).
    Runs the fused op when it fits (the profile's design, see the module docstring), else the math path;
    ``sdpa_kernel`` restricts the choice. Raises RuntimeError
    for mismatched shapes or dtypes, or when no enabled backend can run the inputs.
    """
    _check(query, key, value, attn_mask, dropout_p, enable_gqa)
    if scale is None:
        scale = 1.0 / math.sqrt(query._shape[-1]) if query._shape[-1] else 1.0
    if attn_mask is not None and attn_mask.dtype is not D.bool and attn_mask.dtype is not query.dtype:
        attn_mask = attn_mask.to(query.dtype)
    why = None
    for b in _enabled_backends():
        if b == SDPBackend.FLASH_ATTENTION:
            cfg, why = fused_config(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
            if cfg is not None:
                if dropout_p > 0.0:
                    setup_dropout(cfg, dropout_p)
                m = attn_mask.detach() if attn_mask is not None and attn_mask.requires_grad else attn_mask
                return call(_fused_op, query, key, value, m, cfg)
        elif b == SDPBackend.MATH:
            return math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    raise RuntimeError("No available kernel. Aborting execution." + (f" The fused kernel cannot run: {why}."
                                                                     if why else ""))
