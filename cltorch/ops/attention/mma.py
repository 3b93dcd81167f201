"""Attention forward on matrix units (``cl_kernels/sdpa_mma.cl.mako``): the flash design's forward for float16 and
bfloat16 on NVIDIA's tensor cores, where the GEMM's matrix unit was chosen for the device (``ops/gemm/mma.py``:
``[gemm] matrix_units`` / ``CLTORCH_MATRIX_UNITS`` and its probe) and this kernel's own probe passed too (it adds
warp shuffles for the online softmax's row max and sum).

It takes the common case: no attn_mask, no dropout, head dims of q, k and v equal, a multiple of 16 and at most 128,
the head dim contiguous in q, k and v; causal and grouped-query attention are in. Everything else, and every device
without the unit, runs the flash design's forward (``flash.py``). The backward is the flash design's (it reads the
output and the logsumexp this forward saves, in the same layout).
"""
import math

import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ...backend import probes
from ...backend.program import KernelBuildError
from ..gemm import mma as units
from .flash import enqueue
from .layout import operand

__all__ = ["forward", "applicable", "check", "TEMPLATE"]

TEMPLATE = "sdpa_mma.cl.mako"
VERSION = "1"
LOG2E = 1.0 / math.log(2.0)
_L = np.int64


def applicable(q, k, v, mask, cfg):
    """Why this forward cannot take a call (a string), or None."""
    if q.dtype not in (D.float16, D.bfloat16):
        return f"dtype {q.dtype.name}"
    if mask is not None or cfg.dropout is not None:
        return "a mask or dropout"
    if cfg.E != cfg.EV or cfg.E % 16 or cfg.E > 128:
        return f"head dims {cfg.E}, {cfg.EV} (equal, a multiple of 16, at most 128)"
    return None


def _tiles(D_):
    """(warps, keys per block): 4 warps (64 queries); 64 keys up to head dim 64, 32 above (registers)."""
    return 4, (64 if D_ <= 64 else 32)


def _params(rt, choice, dts, cfg, strides):
    WG, BN = _tiles(cfg.E)
    nat = int(bool(getattr(rt.info, "is_gpu", False)))
    G = 8 if all(x % 8 == 0 for s in strides for x in s[:4]) or not nat else 1
    return dict(unit=choice.unit, emu=int(choice.emulated), dt=dts, D=cfg.E, WG=WG, BN=BN, causal=bool(cfg.causal),
                G=G, nat=nat, **dict(units._SPELLING, **choice.variant)), WG * 16


def _run(rt, choice, dts, q, k, v, cfg):
    q2, qs = operand(q, cfg.nbatch)
    k2, ks = operand(k, cfg.nbatch)
    v2, vs = operand(v, cfg.nbatch)
    if qs[4] not in (0, 1) or ks[4] not in (0, 1) or vs[4] not in (0, 1):
        return None                               # the head dim is strided: the flash design reads any strides
    params, BQ = _params(rt, choice, dts, cfg, (qs, ks, vs))
    BH = cfg.B0 * cfg.H
    out = Tensor._empty(tuple(q._shape[:-1]) + (cfg.EV,), q.dtype, q.device)
    lse = Tensor._empty((BH, cfg.L), D.float32, q.device)
    nqb = -(-cfg.L // BQ)
    from ..softmax import kernel, is_host
    kk = kernel(rt, TEMPLATE, "sdpa_mma", [None, None] + ([None] + [_L] * 4) * 3 + [np.int32] * 5 + [np.float32],
                **params)
    args = [out._storage.cl_buffer(), lse._storage.cl_buffer()]
    for t, s in ((q2, qs), (k2, ks), (v2, vs)):
        args += [t._storage.cl_buffer(), *s[:4]]
    args += [cfg.L, cfg.S, cfg.H, cfg.Hk, nqb, np.float32(cfg.scale * LOG2E)]
    enqueue(rt, kk, BH * nqb, params["WG"] * units.UNITS[choice.unit][1], args, is_host(q2, k2, v2, out))
    return out, lse


def _choice(rt, dts):
    """The unit (a gemm.mma Choice) this forward may use on ``rt``'s device for storage ``dts``, or None."""
    value, _ = units.setting(rt.profile)
    if value.lower() in ("off", "0", "none", "false", ""):
        return None
    choice, _ = units.choose(rt, dts)
    if choice is None or choice.unit != "nv_mma":
        return None
    var = ",".join(f"{k}={v}" for k, v in sorted(choice.variant.items())) or "-"
    name = f"sdpa matrix unit {choice.label} {dts} [{var}] v{VERSION}"
    if choice.emulated:
        ok = probes.verdict(rt, name, lambda rt: check(rt, choice.unit, True, dts, choice.variant))
    else:
        ok = probes.verdict(rt, name, lambda rt: units.isolated(rt, choice.unit, __name__, "check",
                                                               [choice.unit, False, dts, choice.variant]))
    return choice if ok else None          # None: the probe failed, or a capture records and it has not run


def forward(q, k, v, mask, cfg):
    """(out, lse) as ``flash.forward`` gives them, computed on the matrix unit, or None when this forward does
    not take the call (see the module docstring)."""
    if applicable(q, k, v, mask, cfg) or cfg.S == 0 or cfg.B0 * cfg.H * cfg.L == 0:
        return None
    rt = q._runtime()
    dts = "half" if q.dtype is D.float16 else "bf16"
    choice = _choice(rt, dts)
    if choice is None:
        return None
    return _run(rt, choice, dts, q, k, v, cfg)


def _reference(q, k, v, causal, scale):
    s = np.einsum("bhld,bhsd->bhls", q, k) * scale
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    return np.einsum("bhls,bhsd->bhld", e / e.sum(-1, keepdims=True), v), (m[..., 0] + np.log(e.sum(-1)))


# (head dim, L, S, causal) of the probe: a query block and a key block with edges, both head-dim tile rows
SHAPES = ((64, 77, 90, False), (64, 77, 90, True), (128, 40, 40, True))


def check(rt, unit, emulated, dts, variant, shapes=SHAPES):
    """(ok, detail): the kernel on ``rt``'s device against numpy in float64 of the same 16-bit inputs, for each
    (head dim, L, S, causal) of ``shapes`` with two query heads sharing a key head; the output to the storage
    type's rounding (P is rounded to it before P V, as in FlashAttention), the logsumexp to 1e-3."""
    from ..creation import tensor
    from .plan import Cfg
    if not emulated:
        why = units.requirement(rt.info, unit)
        if why:
            return False, why
    choice = units.Choice(unit, emulated, variant, [])
    dev = f"cl:{rt.info.index}"
    rng = np.random.default_rng(5)
    tdt = D.float16 if dts == "half" else D.bfloat16
    tol = 4e-3 if dts == "half" else 2e-2
    worst = 0.0
    try:
        for E, L, S, causal in shapes:
            qn = rng.standard_normal((1, 2, L, E)).astype(np.float32)
            kn = rng.standard_normal((1, 1, S, E)).astype(np.float32)
            vn = rng.standard_normal((1, 1, S, E)).astype(np.float32)
            q, k, v = (tensor(x, device=dev).to(tdt) for x in (qn, kn, vn))
            cfg = Cfg()
            cfg.nbatch, cfg.B0, cfg.H, cfg.Hk, cfg.L, cfg.S, cfg.E, cfg.EV = 2, 1, 2, 1, L, S, E, E
            cfg.mask_kind, cfg.causal, cfg.scale, cfg.qbatch, cfg.design = "none", causal, 1.0 / math.sqrt(E), \
                (1, 2), "flash"
            cfg.dropout = cfg.drop_args = cfg.drop_seed = None
            res = _run(rt, choice, dts, q, k, v, cfg)
            if res is None:
                return False, "launch error: the kernel refused contiguous operands"
            out, lse = res
            f64 = [x.float().cpu().numpy().astype(np.float64) for x in (q, k, v)]
            ref, rlse = _reference(f64[0], np.repeat(f64[1], 2, 1), np.repeat(f64[2], 2, 1), causal,
                                   1.0 / math.sqrt(E))
            err = float(np.abs(out.float().cpu().numpy() - ref).max() / np.abs(ref).max())
            lerr = float(np.abs(lse.cpu().numpy().reshape(rlse.shape) - rlse).max())
            worst = max(worst, err)
            if not np.isfinite(err) or err > tol or not lerr < 1e-3:
                return False, (f"wrong numbers: max relative error {err:.2e} (over {tol:.0e}), logsumexp {lerr:.1e}, "
                               f"head dim {E}, L {L}, S {S}, causal {causal}")
    except KernelBuildError as e:
        return False, "build error: " + units._first_error(e.log)
    return True, f"{len(shapes)} shapes, max relative error {worst:.1e}"
