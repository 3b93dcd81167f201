"""Attention from differentiable ops: the "math" path (``safe_softmax(q @ k^T * scale + bias) @ v``, which also
gives a float mask its gradient) and the fused op's gradients as ops, for a double backward through it."""
from ... import _dtype as D
from ..._dispatch import set_grad_enabled_raw
from ..._tensor import Tensor
from ..softmax import safe_softmax
from .dropout import keep_tensor

__all__ = ["math_attention", "composed_grads", "repeat_heads", "sum_heads", "bias"]


def _matmul(a, b):
    from ..linalg import matmul
    return matmul(a, b)


def repeat_heads(t, rep):
    """(..., Hk, S, E) -> (..., Hk * rep, S, E) with each head repeated rep times (GQA)."""
    sh = tuple(t._shape)
    return t.unsqueeze(-3).expand(sh[:-2] + (rep,) + sh[-2:]).reshape(sh[:-3] + (sh[-3] * rep,) + sh[-2:])


def sum_heads(t, rep):
    """The inverse reduction of :func:`repeat_heads`: (..., Hk * rep, S, E) -> (..., Hk, S, E), summed."""
    sh = tuple(t._shape)
    return t.reshape(sh[:-3] + (sh[-3] // rep, rep) + sh[-2:]).sum(-3)


def bias(mask, causal, L, S, like):
    """The additive score bias of a bool/float mask and the causal mask (None when neither)."""
    from ..creation import arange
    from ..pointwise import where
    b = None
    if causal:
        i = arange(L, device=like.device).reshape(L, 1)
        j = arange(S, device=like.device).reshape(1, S)
        b = where(j > i, float("-inf"), 0.0).to(like.dtype)
    if mask is not None:
        m = mask
        if m.dtype is D.bool:
            m = where(m, 0.0, float("-inf")).to(like.dtype)
        b = m if b is None else b + m
    return b


def composed_grads(g, q, k, v, mask, cfg):
    """The attention gradients from differentiable ops (double backward through the fused path):
    p = safe_softmax(s), dV = p^T dO, dS = p * (dO V^T - rowsum(dO * O)), dQ = dS K * scale, dK = dS^T Q * scale."""
    rep = cfg.H // cfg.Hk if cfg.nbatch else 1
    kk, vv = k, v
    if rep > 1:
        kk = repeat_heads(k, rep)
        vv = repeat_heads(v, rep)
    s = _matmul(q, kk.transpose(-2, -1)) * cfg.scale
    b = bias(mask, cfg.causal, cfg.L, cfg.S, q)
    if b is not None:
        s = s + b
    p = safe_softmax(s, -1)
    if cfg.dropout is not None:
        keep = keep_tensor(cfg, q)
        dv = _matmul((p * keep).transpose(-2, -1), g)
        dp = _matmul(g, vv.transpose(-2, -1)) * keep
    else:
        dv = _matmul(p.transpose(-2, -1), g)
        dp = _matmul(g, vv.transpose(-2, -1))
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = _matmul(ds, kk) * cfg.scale
    dk = _matmul(ds.transpose(-2, -1), q) * cfg.scale
    if rep > 1:
        dk = sum_heads(dk, rep)
        dv = sum_heads(dv, rep)
    return dq, dk, dv


def math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """softmax(q k^T * scale + bias) v with differentiable ops; fully masked rows give zeros."""
    if enable_gqa and query.dim() >= 3 and key._shape[-3] != query._shape[-3]:
        rep = query._shape[-3] // key._shape[-3]
        key = repeat_heads(key, rep)
        value = repeat_heads(value, rep)
    s = _matmul(query, key.transpose(-2, -1)) * scale
    b = bias(attn_mask, is_causal, query._shape[-2], key._shape[-2], query)
    if b is not None:
        s = s + b
    p = safe_softmax(s, -1)
    if dropout_p > 0.0:
        if not hasattr(Tensor, "bernoulli_"):
            raise NotImplementedError("scaled_dot_product_attention with dropout_p > 0 needs Tensor.bernoulli_ "
                                      "(the Philox RNG ops), which this build lacks")
        prev = set_grad_enabled_raw(False)
        try:
            keep = Tensor._empty(p._shape, p.dtype, p.device).bernoulli_(1.0 - dropout_p)
        finally:
            set_grad_enabled_raw(prev)
        p = p * keep * (1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else p * keep
    return _matmul(p, value)
