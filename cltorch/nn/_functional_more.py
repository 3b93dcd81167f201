"""More of ``torch.nn.functional``: margin and CTC losses, linear_cross_entropy, local_response_norm,
embedding_bag, feature_alpha_dropout, grid sampling (grid_sample, affine_grid, ``torch.grid_sampler*``) and
bicubic interpolation.

Floor 7: every function is composed from cltorch's public, differentiable ops, so gradients (and double
gradients) come from autograd. Sources of the formulas: PyTorch's documentation of each function and its CPU
kernels for the conventions (``LossMultiMargin.cpp``, ``LossMultiLabelMargin.cpp``, ``LossCTC.cpp``,
``GridSampler.h``, ``UpSample.h``, ``EmbeddingBag.cpp``); CTC is Graves et al., "Connectionist Temporal
Classification", ICML 2006 (the forward recursion in log space). Exported by ``cltorch.nn.functional``.
"""
import importlib
import math
import numbers

import numpy as np

import cltorch as torch

__all__ = ["multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss",
           "linear_cross_entropy", "local_response_norm", "embedding_bag", "feature_alpha_dropout",
           "grid_sample", "affine_grid"]


def _F():
    from . import functional
    return functional


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _F()._Reduction.legacy_get_string(size_average, reduce)
    return reduction


# ------------------------------------------------------------------------------------------------ margin losses
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,  # noqa: A002
                      reduction="mean"):
    """Multi-class hinge loss as ``torch.nn.functional.multi_margin_loss``:
    ``loss(x, y) = sum_{i != y} w[y] * max(0, margin - x[y] + x[i])^p / C``.

    input ``(N, C)`` or ``(C,)``; target int64 ``(N,)`` or a scalar; weight ``(C,)`` or None; p 1 or 2
    (ValueError otherwise). RuntimeError on mismatched shapes. Differentiable in input.
    """
    reduction = _legacy(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if input.dim() > 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    x = input.reshape(1, -1) if input.dim() <= 1 else input
    N, C = x.shape
    t = target.reshape(-1)
    if t.shape[0] != N:
        raise RuntimeError(f"inconsistent target size, expected {N} but got {list(target.shape)}")
    t = t.long().unsqueeze(1)
    xy = x.gather(1, t)
    h = (margin - xy + x).clamp(min=0)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * weight.gather(0, t.reshape(-1)).unsqueeze(1)
    not_y = torch.ones((N, C), dtype=x.dtype, device=x.device).scatter(1, t, 0.0)
    loss = (h * not_y).sum(1) / C
    if input.dim() <= 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """Multi-label hinge loss as ``torch.nn.functional.multilabel_margin_loss``:
    ``loss(x, y) = sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[y_j] - x[i])) / C``, where the
    targets are ``y``'s entries before its first -1.

    input ``(C,)`` or ``(N, C)``; target int64 of the same shape. RuntimeError on mismatched shapes.
    Differentiable in input.
    """
    reduction = _legacy(size_average, reduce, reduction)
    if input.dim() > 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input.reshape(1, -1) if input.dim() <= 1 else input
    y = target.reshape(x.shape).long()
    N, C = x.shape
    valid = (y != -1).long().cumprod(1)                                 # positions before the first -1
    yc = torch.where(valid.bool(), y, 0)
    vf = valid.to(x.dtype)
    is_target = torch.zeros((N, C), dtype=x.dtype, device=x.device).scatter_add(1, yc, vf) > 0
    xt = x.gather(1, yc)                                                # (N, J): x at each target position
    h = (1.0 - xt.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)          # (N, J, I)
    mask = vf.unsqueeze(2) * (~is_target).to(x.dtype).unsqueeze(1)
    loss = (h * mask).sum((1, 2)) / C
    if input.dim() <= 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` as ``torch.nn.functional.triplet_margin_with_distance_loss``;
    ``distance_function`` defaults to ``pairwise_distance``; ``swap`` uses ``min(d(a, n), d(p, n))``
    (Balntas et al. 2016). ValueError for margin <= 0; RuntimeError when the ranks differ."""
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} "
                         "instead")
    a, p, n = anchor.dim(), positive.dim(), negative.dim()
    if not a == p == n:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D inputs")
    dist = _counterpart(distance_function) if distance_function is not None else _F().pairwise_distance
    dp = dist(anchor, positive)
    dn = dist(anchor, negative)
    if swap:
        dn = torch.minimum(dn, dist(positive, negative))
    loss = (margin + dp - dn).clamp(min=0)
    return _reduce(loss, reduction)


def _counterpart(fn):
    """A distance given as a PyTorch callable (a ``torch.nn.functional`` function or a ``torch.nn`` module such
    as ``PairwiseDistance()``, e.g. from a script that imports both) becomes cltorch's of the same name with the
    same settings; any other callable is used as given."""
    import types
    mod = getattr(fn, "__module__", "") if isinstance(fn, types.FunctionType) else type(fn).__module__
    if not (mod or "").startswith("torch.nn"):
        return fn
    from .modules.module import Module
    if isinstance(fn, types.FunctionType):
        return getattr(_F(), fn.__name__, fn)
    cls = getattr(importlib.import_module("cltorch.nn"), type(fn).__name__, None)
    if cls is None or not issubclass(cls, Module):
        return fn
    obj = cls.__new__(cls)
    Module.__init__(obj)
    for k, v in vars(fn).items():
        if not k.startswith("_") and isinstance(v, (bool, int, float, str, tuple, type(None))):
            setattr(obj, k, v)
    return obj


# ------------------------------------------------------------------------------------------------ CTC
_NEG = -1e30     # log(0) in the recursion: finite, so no inf - inf (NaN) reaches the gradients


_FP64 = {}


def _has_fp64(device):
    """Whether float64 arithmetic runs on device (cached; a device without cl_khr_fp64 raises on use)."""
    key = str(device)
    if key not in _FP64:
        try:
            (torch.ones(2, dtype=torch.float64, device=device).exp()).sum().item()
            _FP64[key] = True
        except Exception:  # noqa: BLE001 - the missing-capability error
            _FP64[key] = False
    return _FP64[key]


def _lse3(a, b, c):
    m = torch.maximum(torch.maximum(a, b), c).detach()
    return m + ((a - m).exp() + (b - m).exp() + (c - m).exp()).log()


def _lengths(v, n, name, device):
    if isinstance(v, torch.Tensor):
        v = v.reshape(-1).tolist()
    elif isinstance(v, numbers.Integral):
        v = [int(v)]
    v = [int(a) for a in v]
    if len(v) != n:
        raise RuntimeError(f"Expected {name} to have value at most {n} entries, but got {len(v)}")
    return v


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist Temporal Classification loss as ``torch.nn.functional.ctc_loss``.

    log_probs ``(T, N, C)`` (or unbatched ``(T, C)``), log-softmax outputs; targets ``(N, S)`` padded or
    1-d concatenated (``sum(target_lengths)``); input_lengths, target_lengths: ``(N,)`` tensors or lists.
    The forward recursion over the blank-extended labels runs in log space, one step of composed ops per
    time step (Graves et al. 2006). reduction 'mean' divides each loss by its target length, then averages;
    impossible alignments give inf (0 with ``zero_infinity``, with zero gradient). The gradient is PyTorch's:
    torch's CTC backward returns ``exp(log_probs) - posterior`` (the gradient with respect to the logits
    before a log_softmax), and so does this one. RuntimeError on inconsistent sizes.
    """
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got {list(log_probs.shape)}")
    T, N, C = lp.shape
    il = _lengths(input_lengths, N, "input_lengths", lp.device)
    tl = _lengths(target_lengths, N, "target_lengths", lp.device)
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    tg = targets.unsqueeze(0) if unbatched and targets.dim() == 1 else targets
    tgn = tg.detach().cpu().numpy().astype(np.int64)
    S = max(tl) if tl else 0
    lab = np.zeros((N, S), np.int64)
    if tgn.ndim == 1 or (not unbatched and targets.dim() == 1):
        flat = tgn.reshape(-1)
        if flat.shape[0] < sum(tl):
            raise RuntimeError(f"Expected tensor to have size at least {sum(tl)} at dimension 1, but got size "
                               f"{flat.shape[0]} for argument #2 'targets'")
        o = 0
        for n in range(N):
            lab[n, :tl[n]] = flat[o:o + tl[n]]
            o += tl[n]
    else:
        if tgn.shape[1] < S:
            raise RuntimeError(f"Expected tensor to have size at least {S} at dimension 1, but got size "
                               f"{tgn.shape[1]} for argument #2 'targets'")
        for n in range(N):
            lab[n, :tl[n]] = tgn[n, :tl[n]]
    for n in range(N):
        if il[n] > T or il[n] < 0:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {il[n]} "
                               f"(while checking arguments for ctc_loss_cpu)")
    L = 2 * S + 1
    ext = np.full((N, L), blank, np.int64)
    ext[:, 1::2] = lab
    skip = np.zeros((N, L), bool)                       # the s-2 transition: a label differing from l'_{s-2}
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    out_dt = lp.dtype
    if lp.dtype is torch.float32 and _has_fp64(lp.device):
        lp = lp.double()          # the recursion's 2T log-sum-exps lose ~1e-4 in float32 on long inputs
    dev, dt = lp.device, lp.dtype
    lpe = lp.gather(2, torch.from_numpy(ext).to(dev).unsqueeze(0).expand(T, N, L).contiguous())   # (T, N, L)
    alive = np.zeros((N, L), np.float64)
    alive[:, 0] = 1.0
    if S > 0:
        alive[:, 1] = 1.0
    alpha = torch.where(torch.from_numpy(alive > 0).to(dev), lpe[0], _NEG)
    skip_t = torch.from_numpy(skip).to(dev)
    neg1 = torch.full((N, 1), _NEG, dtype=dt, device=dev)
    neg2 = torch.full((N, 2), _NEG, dtype=dt, device=dev)
    il_t = torch.tensor(il, device=dev)
    for t in range(1, max(il) if il else 0):
        a1 = torch.cat([neg1, alpha[:, :-1]], 1)
        a2 = torch.where(skip_t, torch.cat([neg2, alpha[:, :-2]], 1), _NEG) if L > 2 else neg1.expand(N, L)
        new = _lse3(alpha, a1, a2) + lpe[t]
        alpha = torch.where((il_t > t).unsqueeze(1), new, alpha)
    end = torch.from_numpy(np.array([2 * s for s in tl], np.int64)).to(dev).unsqueeze(1)
    last = alpha.gather(1, end).squeeze(1)
    prev = alpha.gather(1, (end - 1).clamp(min=0)).squeeze(1)
    prev = torch.where(torch.tensor([s > 0 for s in tl], device=dev), prev, _NEG)
    m = torch.maximum(last, prev).detach()
    nll = -(m + ((last - m).exp() + (prev - m).exp()).log())
    impossible = (nll > -_NEG / 2) | torch.tensor([i == 0 for i in il], device=dev)
    # torch's gradient has an extra exp(log_probs) over the steps each sample uses: add a term whose value is
    # zero and whose gradient is that
    used = (torch.arange(T, device=dev).unsqueeze(1) < il_t.unsqueeze(0)).to(dt).unsqueeze(2)
    ex = (lp.exp() * used).sum((0, 2))
    nll = nll + (ex - ex.detach())
    inf = torch.full((N,), math.inf, dtype=dt, device=dev)
    if zero_infinity:
        nll = torch.where(impossible, torch.zeros((N,), dtype=dt, device=dev), nll)
    else:
        nll = torch.where(impossible, inf, nll)
    nll = nll.to(out_dt)
    if reduction == "mean":
        div = torch.tensor([max(s, 1) for s in tl], dtype=out_dt, device=dev)
        return (nll / div).mean()
    if reduction == "sum":
        return nll.sum()
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    raise ValueError(f"{reduction} is not a valid value for reduction")


# ------------------------------------------------------------------------------------------------ linear + CE
def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,  # noqa: A002
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)`` as torch 2.13's
    ``torch.nn.functional.linear_cross_entropy``.

    linear_weight ``(*out_features, in_features)`` (more than one out dim gives a K-dimensional loss whose
    class dim is the first out dim); linear_bias of shape ``out_features``; ``ignore_index=None`` means -100.
    ``options`` (torch's LinearCrossEntropyOptions: batch chunking to save memory) selects a schedule, not a
    result; it is accepted and this computes the unchunked product.
    """
    F = _F()
    out_f = tuple(linear_weight.shape[:-1])
    w2 = linear_weight.reshape(-1, linear_weight.shape[-1])
    logits = F.linear(input, w2)
    logits = logits.reshape(*input.shape[:-1], *out_f)
    if linear_bias is not None:
        logits = logits + linear_bias
    ii = -100 if ignore_index is None else ignore_index
    return F.cross_entropy(logits, target, weight=weight, ignore_index=ii, reduction=reduction,
                           label_smoothing=label_smoothing)


# ------------------------------------------------------------------------------------------------ normalisation
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """Local response normalisation across channels (Krizhevsky et al. 2012) as
    ``torch.nn.functional.local_response_norm``: ``x / (k + alpha * mean_{size channels}(x^2))^beta``, the
    channel window zero-padded ``size//2`` before and ``(size-1)//2`` after. input ``(N, C, *)`` with at least
    3 dims (ValueError otherwise). Composed from pad and avg_pool2d."""
    F = _F()
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    N, C = input.shape[0], input.shape[1]
    div = (input * input).reshape(N, 1, C, -1)
    div = F.pad(div, (0, 0, size // 2, (size - 1) // 2))
    div = F.avg_pool2d(div, (size, 1), stride=1).reshape(input.shape)
    return input / (div * alpha + k) ** beta


# ------------------------------------------------------------------------------------------------ embedding bag
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,  # noqa: A002
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embeddings as ``torch.nn.functional.embedding_bag``.

    input: ``(B, L)`` (B bags of L indices; offsets must be None) or 1-d with ``offsets`` (the start of each
    bag; ``include_last_offset``: the last entry ends the last bag). weight ``(num_embeddings, dim)``.
    ``per_sample_weights`` (same shape as input) scales each row, mode 'sum' only. ``padding_idx`` rows are
    left out of the bags (and of the mean's count). Empty bags give zeros. Returns ``(B, dim)``.
    Composed from embedding (with its max_norm and scale_grad_by_freq) and index_add (sum/mean) or per-bag
    ``max`` (mode 'max'). ValueError / NotImplementedError as PyTorch for bad arguments.
    """
    F = _F()
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"embedding_bag: expected input of dtype int64 or int32, got {input.dtype}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                         f"then it must have the same shape as the input ({list(input.shape)})")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        B, Lb = input.shape
        starts = list(range(0, B * Lb, Lb)) if Lb else [0] * B
        idx = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
        total = B * Lb
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        starts = [int(v) for v in offsets.tolist()]
        idx, psw, total = input, per_sample_weights, input.shape[0]
        if include_last_offset:
            if not starts:
                raise RuntimeError("include_last_offset: number of offsets should be at least 1")
            total = min(total, starts[-1])
            starts = starts[:-1]
        if starts and starts[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {starts[0]}")
        if starts and starts[-1] > input.shape[0]:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length ({input.shape[0]}), but got "
                               f"offsets[-1] of {starts[-1]}")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    B = len(starts)
    n = weight.shape[0]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += n
        if not 0 <= padding_idx < n:
            raise AssertionError("padding_idx must be within the number of embeddings")
    rows = F.embedding(idx.long(), weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)
    ends = starts[1:] + [total]
    bag = np.zeros(max(int(idx.shape[0]), 0), np.int64)
    inbag = np.zeros(bag.shape[0], bool)
    for b, (s, e) in enumerate(zip(starts, ends)):
        bag[s:e] = b
        inbag[s:e] = True
    keep = inbag
    if padding_idx is not None:
        keep = keep & (idx.detach().cpu().numpy().reshape(-1) != padding_idx)
    D = weight.shape[1]
    dev, dt = weight.device, weight.dtype
    if mode == "max":
        outs = []
        for b, (s, e) in enumerate(zip(starts, ends)):
            sel = np.nonzero(keep[s:e])[0] + s
            if sel.size == 0:
                outs.append(torch.zeros((D,), dtype=dt, device=dev))
            else:
                outs.append(rows.index_select(0, torch.from_numpy(sel).to(dev)).max(0)[0])
        return torch.stack(outs) if outs else torch.zeros((0, D), dtype=dt, device=dev)
    kf = torch.from_numpy(keep.astype(np.float64)).to(dev).to(dt)
    r = rows * kf.unsqueeze(1)
    if psw is not None:
        r = r * psw.unsqueeze(1)
    out = torch.zeros((B, D), dtype=dt, device=dev).index_add(0, torch.from_numpy(bag).to(dev), r)
    if mode == "mean":
        cnt = np.bincount(bag[keep], minlength=B).astype(np.float64)
        out = out / torch.from_numpy(np.maximum(cnt, 1.0)).to(dev).to(dt).unsqueeze(1)
    return out


# ------------------------------------------------------------------------------------------------ dropout
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Alpha dropout of whole channels as ``torch.nn.functional.feature_alpha_dropout``: a channel of
    ``(N, C, *)`` is kept with probability 1-p, else set to SELU's negative saturation; then the affine map
    that keeps SELU's mean and variance (Klambauer et al. 2017). Identity when not training. The mask comes
    from the Philox generator (``bernoulli_``)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        r = input * 0.0
        return input.copy_(r) if inplace else r
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if input.dim() >= 2 else tuple(input.shape)
    noise = torch.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1.0 - p)
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = (noise - 1.0) * (alpha * a) + alpha * a * p
    r = input * (noise * a) + b
    if inplace:
        with torch.no_grad():
            input.copy_(r)
        return input
    return r


# ------------------------------------------------------------------------------------------------ grid sampling
_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADS = {"zeros": 0, "border": 1, "reflection": 2}


def affine_grid(theta, size, align_corners=None):
    """Sampling grid ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) of the affine maps ``theta`` ``(N, 2, 3)``
    (``(N, 3, 4)``) over the normalized output coordinates, as ``torch.nn.functional.affine_grid`` (the
    coordinates are pixel centres, ``linspace(-1, 1, n) * (n - 1) / n``, unless ``align_corners``).
    ValueError / NotImplementedError as PyTorch for bad sizes."""
    if align_corners is None:
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ValueError(f"Expected theta batch {theta.shape[0]} to match size batch {size[0]}")

    def lin(n):
        v = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return v if align_corners else v * (n - 1) / n
    axes = [lin(n) for n in reversed(spatial)]                  # x (width) first
    mesh = np.meshgrid(*axes[::-1], indexing="ij")               # over (D,) H, W
    base = np.stack([m for m in mesh[::-1]] + [np.ones_like(mesh[0])], -1)   # (..., x, y, [z,] 1)
    nd = len(spatial)
    b = torch.from_numpy(base.reshape(-1, nd + 1)).to(theta.device).to(theta.dtype)
    grid = b.unsqueeze(0).matmul(theta.transpose(1, 2))         # (N, P, nd)
    return grid.reshape(size[0], *spatial, nd)


def _unnormalize(c, n, align):
    return (c + 1) * ((n - 1) / 2.0) if align else ((c + 1) * n - 1) / 2.0


def _reflect(c, lo2, hi2):
    """PyTorch's reflect_coordinates: reflect c into [lo2/2, hi2/2] (twice the bounds, to stay integral)."""
    if lo2 == hi2:
        return c * 0.0
    mn = lo2 / 2.0
    span = (hi2 - lo2) / 2.0
    a = (c - mn).abs()
    flips = (a / span).floor().detach()
    extra = a - flips * span
    even = (flips.remainder(2) == 0)
    return torch.where(even, extra + mn, span - extra + mn)


def _pad_coord(c, n, pad, align):
    if pad == 1:
        return c.clamp(0, n - 1)
    if pad == 2:
        c = _reflect(c, 0, 2 * (n - 1)) if align else _reflect(c, -1, 2 * n - 1)
        return c.clamp(0, n - 1)
    return c


def _tap(flat, coords, sizes, weight):
    """sum over a tap of weight * input[coords] (zero outside): flat (N, C, V); coords list of (N, P) float
    integral tensors per dim (slowest first); weight (N, P)."""
    ok = None
    lin = None
    for c, n in zip(coords, sizes):
        inside = (c >= 0) & (c <= n - 1)
        ok = inside if ok is None else ok & inside
        ci = c.clamp(0, n - 1).long()
        lin = ci if lin is None else lin * n + ci
    N, C = flat.shape[0], flat.shape[1]
    v = flat.gather(2, lin.unsqueeze(1).expand(N, C, lin.shape[1]).contiguous())
    return v * (weight * ok.to(weight.dtype)).unsqueeze(1)


def _cubic(t):
    """The four cubic-convolution weights (Keys 1981, A = -0.75, as PyTorch) for fractional offset t."""
    A = -0.75

    def near(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _grid_sampler(input, grid, mode, pad, align):  # noqa: A002
    nd = input.dim() - 2
    if nd not in (2, 3) or grid.dim() != nd + 2 or grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if mode == 2 and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    N, C = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])                       # (D,) H, W
    out_sp = tuple(grid.shape[1:-1])
    g = grid.reshape(N, -1, nd)
    # grid's last dim is (x, y[, z]): x indexes W
    raw = [g[:, :, nd - 1 - d] for d in range(nd)]       # per input dim, slowest first
    src = [_unnormalize(c, n, align) for c, n in zip(raw, sizes)]
    flat = input.reshape(N, C, -1)
    if mode == 2:
        iy, ix = src
        y0, x0 = iy.floor().detach(), ix.floor().detach()
        ty, tx = iy - y0, ix - x0
        wy, wx = _cubic(ty), _cubic(tx)
        out = None
        for a in range(4):
            for b in range(4):
                cy = _pad_coord(y0 + (a - 1), sizes[0], pad, align)
                cx = _pad_coord(x0 + (b - 1), sizes[1], pad, align)
                if pad != 0:
                    cy, cx = cy.round().detach(), cx.round().detach()
                term = _tap(flat, [cy, cx], sizes, wy[a] * wx[b])
                out = term if out is None else out + term
        return out.reshape(N, C, *out_sp)
    src = [_pad_coord(c, n, pad, align) for c, n in zip(src, sizes)]
    if mode == 1:
        coords = [c.round().detach() for c in src]       # round half to even, as nearbyint
        one = torch.ones_like(src[0])
        return _tap(flat, coords, sizes, one.detach()).reshape(N, C, *out_sp)
    lo = [c.floor().detach() for c in src]
    fr = [c - l for c, l in zip(src, lo)]
    out = None
    for corner in range(1 << nd):
        coords, w = [], None
        for d in range(nd):
            hi = (corner >> (nd - 1 - d)) & 1
            coords.append(lo[d] + hi)
            wd = fr[d] if hi else 1 - fr[d]
            w = wd if w is None else w * wd
        term = _tap(flat, coords, sizes, w)
        out = term if out is None else out + term
    return out.reshape(N, C, *out_sp)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """Sample ``input`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``) at the normalized coordinates ``grid``
    ``(N, Ho, Wo, 2)`` (``(N, Do, Ho, Wo, 3)``; last dim (x, y[, z]) in [-1, 1]) as
    ``torch.nn.functional.grid_sample``: mode 'bilinear' (trilinear for 5-d), 'nearest' (round half to even)
    or 'bicubic' (4-d; Keys' A = -0.75); padding_mode 'zeros', 'border' or 'reflection'. Composed from
    gathers, so it is differentiable in input and grid (the grid gradient of 'nearest' is 0). ValueError for
    unknown modes, RuntimeError for mismatched shapes."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADS:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    return _grid_sampler(input, grid, _MODES[mode], _PADS[padding_mode], bool(align_corners))


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    """``torch.grid_sampler``: grid_sample with integer modes (0 bilinear, 1 nearest, 2 bicubic) and padding
    modes (0 zeros, 1 border, 2 reflection)."""
    return _grid_sampler(input, grid, int(interpolation_mode), int(padding_mode), bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    """``torch.grid_sampler_2d`` (4-d input); see :func:`grid_sampler`."""
    if input.dim() != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, but got input with sizes {list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    """``torch.grid_sampler_3d`` (5-d input, bilinear or nearest); see :func:`grid_sampler`."""
    if input.dim() != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, but got input with sizes {list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


# ------------------------------------------------------------------------------------------------ bicubic resize
def _src_index(out_n, in_n, align, scale):
    """PyTorch's area_pixel_compute_source_index for cubic interpolation (not clamped at 0)."""
    o = np.arange(out_n, dtype=np.float64)
    if align:
        r = (in_n - 1) / (out_n - 1) if out_n > 1 else 0.0
        return o * r
    r = (1.0 / scale) if scale is not None and scale > 0 else in_n / out_n
    return (o + 0.5) * r - 0.5


def _bicubic_dim(x, dim, out_n, align, scale):
    in_n = x.shape[dim]
    src = _src_index(out_n, in_n, align, scale).astype(np.float32)
    i0 = np.floor(src)
    t = (src - i0).astype(np.float64)
    ws = _cubic(t)
    out = None
    shape = [1] * x.dim()
    shape[dim] = out_n
    for k in range(4):
        idx = np.clip(i0.astype(np.int64) - 1 + k, 0, in_n - 1)
        v = x.index_select(dim, torch.from_numpy(idx).to(x.device))
        w = torch.from_numpy(np.asarray(ws[k], np.float64)).to(x.device).to(x.dtype).reshape(shape)
        term = v * w
        out = term if out is None else out + term
    return out


def interpolate_bicubic(input, size, scales, align_corners):  # noqa: A002
    """Bicubic resize of ``(N, C, H, W)`` to ``size`` (PyTorch's upsample_bicubic2d: Keys' cubic convolution,
    A = -0.75, separable, taps clamped at the border; ``scales``: the per-dim scale factors used for the
    source coordinates when not align_corners, or None). Composed from index_select, so differentiable."""
    if input.dim() != 4:
        raise NotImplementedError(f"Got {input.dim()}D input, but bicubic mode needs 4D input")
    sc = scales if scales is not None else (None, None)
    y = _bicubic_dim(input, 2, int(size[0]), align_corners, sc[0])
    return _bicubic_dim(y, 3, int(size[1]), align_corners, sc[1])


def interpolate_extra(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):  # noqa: A002
    """The modes ``cltorch.ops.padding.interpolate`` leaves out, for ``nn.functional.interpolate``: 'bicubic'
    (4-d input) and 'area' on 5-d input (adaptive_avg_pool3d). Output sizes as PyTorch (``floor(d * s)``,
    and ``1/s`` in the source index unless ``recompute_scale_factor``); NotImplementedError for antialias."""
    if antialias:
        raise NotImplementedError("antialias=True is not supported")
    dim = input.dim() - 2
    if mode == "area" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)] * dim
        if len(out) != dim:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(input.shape[2:])} and output size of {out}.")
        scales = None
    elif scale_factor is not None:
        sf = [float(s) for s in scale_factor] if isinstance(scale_factor, (list, tuple)) else \
            [float(scale_factor)] * dim
        if len(sf) != dim:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                             f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                             f"shape {sf}.")
        out = [int(math.floor(float(input.shape[i + 2]) * sf[i])) for i in range(dim)]
        scales = None if recompute_scale_factor else sf
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode == "area":
        return _F().adaptive_avg_pool3d(input, tuple(out))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"(H: {list(input.shape[2:])}) output ({out})")
    return interpolate_bicubic(input, out, scales, bool(align_corners))
