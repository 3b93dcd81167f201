"""Random numbers: Generator objects and the sampling ops, on Philox4x32-10 counters (DESIGN.md decision 6).

A Generator's state is (seed, offset): each fill uses counters offset, offset+1, ... and advances the
offset by the counters it consumed, so element i of a draw depends only on (seed, offset, i). The same
seed gives bit-identical numbers on ``cpu``, every ``cl:N`` and the numpy reference (``_philox_ref``),
normal and exponential draws included (their log/sin/cos/sqrt are our own +,-,* polynomials).

One default generator serves every device, as ``torch.manual_seed`` seeds them all.
``randperm`` and ``multinomial`` sort or search Philox draws on the host (numpy, stable), so they too
are identical on every device.
"""
import numpy as np

from .. import _dtype as D
from .. import backend
from .._device import canonical
from .._tensor import Tensor
from ._util import method, size_args
from . import _philox_launch as PL
from . import _philox_ref as REF
from .elementwise import broadcast_shapes

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "default_generator",
           "rand", "randn", "randint", "randperm", "normal", "rand_like", "randn_like", "randint_like", "bernoulli",
           "multinomial", "fork_rng"]

_MASK64 = (1 << 64) - 1


class Generator:
    """A Philox generator: ``manual_seed(s)`` returns self; ``initial_seed()``; ``get_state()``/``set_state()``
    as a uint8 tensor of 16 bytes (seed and offset, little endian); ``device`` is informational (the values
    do not depend on it)."""

    def __init__(self, device="cpu"):
        self.device = canonical(device) if not isinstance(device, str) or device != "cpu" else canonical("cpu")
        self._seed = 67280421310721
        self._offset = 0

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < -(1 << 63) or seed >= (1 << 64):
            raise RuntimeError(f"Overflow when unpacking long: seed {seed} out of range")
        self._seed = seed & _MASK64
        self._offset = 0
        return self

    def seed(self):
        import os
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        from .creation import tensor
        raw = np.array([self._seed, self._offset], dtype=np.uint64).view(np.uint8)
        return tensor(raw, dtype=D.uint8)

    def set_state(self, state):
        raw = np.asarray(state.tolist(), dtype=np.uint8)
        if raw.size != 16:
            raise RuntimeError(f"Generator state must be 16 bytes, got {raw.size}")
        s, o = raw.view(np.uint64)
        self._seed, self._offset = int(s), int(o)
        return self

    def _take(self, counters):
        off = self._offset
        self._offset = (self._offset + int(counters)) & _MASK64
        return off

    def __repr__(self):
        return f"<cltorch.Generator seed={self._seed} offset={self._offset}>"


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (every device); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


class fork_rng:
    """Context manager restoring the default generator's state on exit."""

    def __init__(self, devices=None, enabled=True):
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self._state = (default_generator._seed, default_generator._offset)

    def __exit__(self, *a):
        if self.enabled:
            default_generator._seed, default_generator._offset = self._state


def _gen(generator):
    return generator if generator is not None else default_generator


def _fill(t, kind, generator, p_tensor=None, **kw):
    """Fill tensor t in place with draws of ``kind``; non-contiguous targets go through a contiguous temp.
    ``p_tensor``: bernoulli's probabilities, a contiguous float32/float64 tensor of t's shape on t's device.

    A cpu tensor is filled by the OpenCL CPU device's Philox kernel, or, on a machine without an OpenCL CPU device
    (GPUs only), on the host by the numpy reference (``_host_fill``), which gives the same bits."""
    if t.numel() == 0:
        return t
    target = t if t.is_contiguous() else Tensor._empty(t._shape, t.dtype, t.device)
    g = _gen(generator)
    np_dt = target.dtype.np
    ref_kind = "bits" if kind == "bernoulli" else kind
    off = g._offset
    st = target._storage
    if st.host is not None and not backend.cpu_device_present():
        _host_fill(st, target._offset, target.numel(), kind, g._seed, off, p_tensor, **kw)
        used = None
    else:
        rt = st.runtime()
        fn = {"uniform": PL.fill_uniform, "normal": PL.fill_normal, "exponential": PL.fill_exponential,
              "randint": PL.fill_randint, "bernoulli": PL.fill_bernoulli}[kind]
        if p_tensor is not None:
            kw = dict(kw, p_buf=p_tensor._storage.cl_buffer(), p_offset=p_tensor._offset, p_dtype=p_tensor.dtype.np)
        used = fn(rt, st.cl_buffer(), target._offset, target.numel(), np_dt, g._seed, off, **kw)
        if st.host is not None:
            rt.finish_if_exposed()
    g._take(used if used is not None else REF.counters_used(ref_kind, target.numel(), np_dt))
    if target is not t:
        from .views import _copy_into
        _copy_into(t, target)
    t._storage.version += 1
    return t


_HOST_BLOCKS = 1 << 18      # Philox blocks per chunk of a host fill (bounds its temporaries to some 10 MB)


def _host_fill(st, offset, n, kind, seed, philox_offset, p_tensor=None, **kw):
    """Write ``n`` draws of ``kind`` into host storage ``st`` from element ``offset``, computed by the numpy Philox
    reference (``_philox_ref``, bit-identical to the kernels), in chunks of whole Philox blocks: a chunk starting
    at element ``s`` starts at counter ``philox_offset + s // elements_per_block``. Raises as the kernels' fills
    do (TypeError for a dtype the draw cannot produce, ValueError for a rate <= 0)."""
    dt = st.dtype.np
    ref_kind = "bits" if kind == "bernoulli" else kind
    per = REF.elements_per_block(ref_kind, dt)
    if kind == "exponential" and not float(kw["lambd"]) > 0.0:
        raise ValueError(f"exponential_ expects lambda > 0.0, but found lambda={kw['lambd']}")
    p = None
    if p_tensor is not None:
        p = p_tensor._host_view().reshape(-1)
    st.host_sync()
    out = st.host
    step = per * _HOST_BLOCKS
    for s in range(0, n, step):
        m = min(step, n - s)
        o = philox_offset + s // per
        if kind == "uniform":
            v = REF.uniform(seed, o, m, dt, kw.get("low", 0.0), kw.get("high", 1.0))
        elif kind == "normal":
            v = REF.normal(seed, o, m, dt, kw.get("mean", 0.0), kw.get("std", 1.0))
        elif kind == "exponential":
            v = REF.exponential(seed, o, m, dt, kw["lambd"])
        elif kind == "randint":
            v = REF.randint(seed, o, m, kw["low"], kw["high"], dt)
        else:
            v = REF.bernoulli(seed, o, m, kw.get("p", 0.5) if p is None else p[s:s + m], dt)
        out[offset + s:offset + s + m] = v


def _float_target(t, what):
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{what} expects a floating point tensor, got {t.dtype}")
    if t.dtype is D.float16:
        tmp = Tensor._empty(t._shape, D.float32, t.device)
        return tmp
    return None


def _via_complex_parts(t, fill, mean=0.0):
    """Random fills of a complex tensor: ``fill`` draws both parts (a contiguous real tensor of shape S + (2,)),
    ``mean`` is added to the real part, and the pairs are copied into t's real view."""
    from .complex import real_view
    from .views import _copy_into
    tmp = Tensor._empty(t._shape + (2,), t.dtype.to_real(), t.device)
    fill(tmp)
    if mean:
        re = tmp.select(-1, 0)
        _copy_into(re, re + mean)
    _copy_into(real_view(t), tmp)
    return t


def _via_float32(t, fill):
    tmp = _float_target(t, "random")
    if tmp is None:
        return fill(t)
    fill(tmp)
    from .views import _copy_into
    _copy_into(t, tmp)
    return t


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Fill with U[a, b) draws (float32: 24 random bits); complex: both parts, as PyTorch."""
    if self.dtype.is_complex:
        return _via_complex_parts(self, lambda t: _fill(t, "uniform", generator, low=a, high=b))
    return _via_float32(self, lambda t: _fill(t, "uniform", generator, low=a, high=b))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with N(mean, std^2) draws (Box-Muller on our own polynomial log/sin/cos/sqrt)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if self.dtype.is_complex:     # complex normal of variance std^2: each part N(0, std^2 / 2), mean on the real part
        return _via_complex_parts(self, lambda t: _fill(t, "normal", generator, mean=0.0, std=std / 2 ** 0.5),
                                  mean)
    return _via_float32(self, lambda t: _fill(t, "normal", generator, mean=mean, std=std))


def exponential_(self, lambd=1.0, *, generator=None):
    return _via_float32(self, lambda t: _fill(t, "exponential", generator, lambd=lambd))


def _from_uniform(self, transform, generator, what, integer_ok=False):
    """Fill self with ``transform(u)``, u a float32 (float64 for a float64 target) tensor of U[0, 1) Philox draws;
    the transform is composed of elementwise tensor ops."""
    if not (self.dtype.is_floating_point or (integer_ok and self.dtype is not D.bool)):
        raise RuntimeError(f"{what} expects a floating point tensor, got {self.dtype}")
    dt = D.float64 if self.dtype is D.float64 else D.float32
    u = Tensor._empty(self._shape, dt, self.device)
    _fill(u, "uniform", generator, low=0.0, high=1.0)
    from .views import _copy_into
    _copy_into(self, transform(u))
    self._storage.version += 1
    return self


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy(median, sigma) draws: median + sigma tan(pi (u - 1/2)), u ~ U[0, 1) (inverse CDF).
    Raises RuntimeError for sigma <= 0 or an integer tensor."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _from_uniform(self, lambda u: ((u - 0.5) * np.pi).tan() * sigma + median, generator, "cauchy_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std^2)) draws. Raises RuntimeError for std <= 0 or an integer tensor."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"log_normal_ expects a floating point tensor, got {self.dtype}")
    dt = D.float64 if self.dtype is D.float64 else D.float32
    z = Tensor._empty(self._shape, dt, self.device)
    _fill(z, "normal", generator, mean=mean, std=std)
    from .views import _copy_into
    _copy_into(self, z.exp())
    self._storage.version += 1
    return self


def geometric_(self, p, *, generator=None):
    """Fill with Geometric(p) draws on {1, 2, ...} (trials up to the first success): ceil(log(1 - u) / log(1 - p)),
    at least 1 (inverse CDF). Integer tensors are allowed, as in PyTorch; 0 < p < 1 else RuntimeError."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    lq = float(np.log1p(-p))
    return _from_uniform(self, lambda u: ((-u).log1p() / lq).ceil().clamp(min=1), generator, "geometric_",
                         integer_ok=True)


def random_(self, from_=0, to=None, *, generator=None):
    """Integers in [from, to) (to defaults to 2**mantissa for floats, the dtype's max + 1 for integers)."""
    if to is None:
        if self.dtype.is_floating_point:
            to = (1 << {D.float16: 11, D.float32: 24, D.float64: 53}[self.dtype]) + 1
        elif self.dtype is D.bool:
            to = 2
        else:
            to = D.iinfo(self.dtype).max + 1
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    if self.dtype is D.float16:
        tmp = Tensor._empty(self._shape, D.float32, self.device)
        _fill(tmp, "randint", generator, low=from_, high=to)
        from .views import _copy_into
        return _copy_into(self, tmp)
    return _fill(self, "randint", generator, low=from_, high=to)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws of probability p (a number, or a tensor broadcastable to self). float16 and bfloat16
    (dropout's masks under autocast) are drawn as float32 and copied."""
    if self.dtype is D.bfloat16 or self.dtype is D.float16:
        from .views import _copy_into
        tmp = Tensor._empty(self._shape, D.float32, self.device)
        bernoulli_(tmp, p, generator=generator)
        _copy_into(self, tmp)
        self._storage.version += 1
        return self
    if isinstance(p, Tensor):
        pt = p.to(device=self.device).expand(*self._shape).contiguous()
        if pt.dtype not in (D.float32, D.float64):
            pt = pt.float()
        return _fill(self, "bernoulli", generator, p_tensor=pt)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _fill(self, "bernoulli", generator, p=p)


def _factory(shape, dtype, device, requires_grad, fill):
    from .creation import empty
    t = empty(*shape, dtype=dtype, device=device)
    fill(t)
    if requires_grad:
        t.requires_grad_(True)
    return t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
         pin_memory=False):
    """U[0, 1) draws of ``size``."""
    return _factory(size_args(size), dtype, device, requires_grad, lambda t: uniform_(t, generator=generator))


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
          pin_memory=False):
    """N(0, 1) draws of ``size``."""
    return _factory(size_args(size), dtype, device, requires_grad, lambda t: normal_(t, generator=generator))


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers in [low, high) of ``size`` (int64 by default)."""
    if size is None:
        if isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
        else:
            raise TypeError("randint() missing required argument 'size'")
    if high is None:
        low, high = 0, low
    return _factory(tuple(size), dtype or D.int64, device, requires_grad,
                    lambda t: random_(t, low, high, generator=generator))


def rand_like(x, *, dtype=None, device=None, requires_grad=False, generator=None, memory_format=None):
    return rand(x._shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad,
                generator=generator)


def randn_like(x, *, dtype=None, device=None, requires_grad=False, generator=None, memory_format=None):
    return randn(x._shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad,
                 generator=generator)


def randint_like(x, low=0, high=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    if high is None:
        low, high = 0, low
    return randint(low, high, x._shape, dtype=dtype or x.dtype, device=device or x.device, generator=generator)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1: a stable argsort of Philox words (identical on every device)."""
    from .creation import tensor
    g = _gen(generator)
    if n == 0:
        return tensor(np.zeros(0, np.int64), dtype=dtype or D.int64, device=device)
    nblocks = REF.counters_used("bits", n)
    words = REF.random_words(g._seed, g._offset, nblocks).reshape(-1)[:n]
    g._take(nblocks)
    perm = np.argsort(words, kind="stable")
    return tensor(perm.astype(np.int64), dtype=dtype or D.int64, device=device)


def _uniform_host(n, generator, dtype=np.float64):
    """U[0, 1) float64 draws of the Philox stream, on the host (numpy reference)."""
    g = _gen(generator)
    nblocks = REF.counters_used("uniform", n, np.float64)
    w = REF.random_words(g._seed, g._offset, nblocks).astype(np.uint64)
    g._take(nblocks)
    w = w.reshape(-1, 2)[:n]
    bits = ((w[:, 1] << np.uint64(32)) | w[:, 0]) >> np.uint64(11)
    return bits.astype(np.float64) * (1.0 / (1 << 53))


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Samples category indices from the rows of ``input`` (non-negative weights, 1-D or 2-D).
    With replacement: inverse CDF of uniform draws; without: the exponential-race (Gumbel top-k) method.
    Runs on the host from Philox draws, so results are identical on every device."""
    from .creation import tensor
    p = np.asarray(input.detach().cpu().tolist(), dtype=np.float64)
    one = p.ndim == 1
    p2 = p.reshape(1, -1) if one else p
    if (p2 < 0).any() or not np.isfinite(p2).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (p2.sum(1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    k = p2.shape[1]
    if not replacement and num_samples > k:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"({num_samples} > {k})")
    out = np.empty((p2.shape[0], num_samples), dtype=np.int64)
    for r in range(p2.shape[0]):
        w = p2[r] / p2[r].sum()
        if replacement:
            u = _uniform_host(num_samples, generator)
            cdf = np.cumsum(w)
            cdf[-1] = 1.0
            out[r] = np.minimum(np.searchsorted(cdf, u, side="right"), k - 1)
        else:
            u = _uniform_host(k, generator)
            with np.errstate(divide="ignore"):
                keys = -np.log1p(-u) / w           # exponential race: smallest keys win
            out[r] = np.argsort(keys, kind="stable")[:num_samples]
    res = out[0] if one else out
    return tensor(res, dtype=D.int64, device=input.device)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """0/1 draws with the probabilities in ``input`` (or a scalar p), same dtype and shape as input."""
    from .creation import empty_like
    out = empty_like(input)
    return bernoulli_(out, input if p is None else p, generator=generator)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """N(mean, std) draws: tensor mean and/or std broadcast, or scalars with ``size``. Only the strided layout
    exists (another raises RuntimeError); ``out`` receives the draws."""
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise RuntimeError(f"normal: layout {layout} is not supported (only torch.strided)")
    if out is not None:
        r = normal(mean, std, size, generator=generator, dtype=dtype or out.dtype, device=device or out.device)
        return out.copy_(r)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = ref._shape if not (isinstance(mean, Tensor) and isinstance(std, Tensor)) else \
            broadcast_shapes(mean._shape, std._shape)
        z = randn(shape, generator=generator, dtype=ref.dtype, device=ref.device)
        return z * std + mean
    return _factory(tuple(size), dtype, device, requires_grad,
                    lambda t: normal_(t, mean, std, generator=generator))


method("uniform_", uniform_)
method("normal_", normal_)
method("exponential_", exponential_)
method("cauchy_", cauchy_)
method("log_normal_", log_normal_)
method("geometric_", geometric_)
method("random_", random_)
method("bernoulli_", bernoulli_)
method("bernoulli", lambda self, p=None, *, generator=None: bernoulli(self, p, generator=generator))
method("multinomial", lambda self, num_samples, replacement=False, *, generator=None:
       multinomial(self, num_samples, replacement, generator=generator))
