"""``vmap`` of ``torch.func``, by running the function once per sample and stacking the results.

cltorch has no batching transform (no batched-tensor wrapper that every op understands), so ``vmap(f)(x)`` is
``stack([f(x[0]), f(x[1]), ...])`` with PyTorch's argument handling: ``in_dims``/``out_dims`` as pytree prefixes,
``None`` for unmapped inputs and outputs, keyword arguments passed unmapped, nesting, and ``vmap(grad(f))`` for
per-sample gradients. The values match PyTorch's; the speed is that of a Python loop over the batch.

Randomness. Every random draw goes through ``Generator._take`` (cltorch/ops/random.py advances a generator's Philox
offset only there), so while a vmap runs, ``_RandomGuard`` wraps that method: 'error' raises before the draw
advances the generator; 'same' records each generator's state at its first draw and restores it before every later
sample (all samples see the same numbers, and the generator ends one sample's draws ahead); 'different' lets the
samples draw in turn. The wrapper is installed while any guard is active (not thread-safe across threads that
draw random numbers at the same time).
"""
import functools

from .._tensor import Tensor
from ..ops import random as _random
from ..ops.compare import equal
from ..ops.joins import stack
from ._pytree import tree_flatten, tree_unflatten, broadcast_prefix, spec_str

__all__ = ["vmap"]

_ACTIVE = []            # the guards of the running vmaps / jacfwds, outermost first
_ORIG_TAKE = []         # Generator._take while the wrapper is installed


def _guarded_take(gen, counters):
    for g in _ACTIVE:
        g.on_draw(gen)
    return _ORIG_TAKE[0](gen, counters)


class _RandomGuard:
    """Applies one vmap level's ``randomness`` rule to every random draw made while it is active."""

    def __init__(self, randomness):
        self.randomness = randomness
        self.saved = {}         # id(generator) -> (generator, seed, offset) at its first draw ('same')

    def on_draw(self, gen):
        if self.randomness == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                               "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                               "out of vmap")
        if self.randomness == "same" and id(gen) not in self.saved:
            self.saved[id(gen)] = (gen, gen._seed, gen._offset)

    def next_sample(self):
        for gen, s, o in self.saved.values():
            gen._seed, gen._offset = s, o

    def __enter__(self):
        if not _ACTIVE:
            _ORIG_TAKE[:] = [_random.Generator._take]
            _random.Generator._take = _guarded_take
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        _ACTIVE.remove(self)
        if not _ACTIVE:
            _random.Generator._take = _ORIG_TAKE.pop()


def _check_randomness_arg(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


def _name(func):
    return getattr(func, "__name__", repr(func))


def _flat_in_dims(in_dims, args, func):
    nm = _name(func)
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"vmap({nm}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if len(args) == 0:
        raise ValueError(f"vmap({nm})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to "
                         "vmap over a function with no inputs. The latter is unsupported.")
    flat, spec = tree_flatten(args)
    dims = broadcast_prefix(in_dims, spec)
    if dims is None:
        raise ValueError(f"vmap({nm}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the structure "
                         f"of `inputs`. in_dims has structure {spec_str(tree_flatten(in_dims)[1])} but inputs has "
                         f"structure {spec_str(spec)}.")
    for i, (a, d) in enumerate(zip(flat, dims)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({nm}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but in_dim "
                             "must be either an integer dimension or None.")
        if d is None:
            continue
        if not isinstance(a, Tensor):
            raise ValueError(f"vmap({nm}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                             f"input is of type {type(a)}. We cannot vmap over non-Tensor arguments, please use None "
                             "as the respective in_dim")
        n = a.dim()
        if d < -n or d >= n:
            raise ValueError(f"vmap({nm}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but that "
                             f"input is a Tensor of dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim < "
                             f"{n}.")
        dims[i] = d % n
    sizes = [a.shape[d] for a, d in zip(flat, dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return flat, spec, dims, sizes[0]


def _same(vals):
    first = vals[0]
    for v in vals[1:]:
        if v is first:
            continue
        if isinstance(first, Tensor) and isinstance(v, Tensor):
            if v.shape != first.shape or v.dtype != first.dtype or not equal(v, first):
                return False
        elif isinstance(first, Tensor) or isinstance(v, Tensor) or not (v == first):
            return False
    return True


def _combine(results, out_dims, func):
    nm = _name(func)
    flat0, spec = tree_flatten(results[0])
    flats = [flat0]
    for r in results[1:]:
        f, s = tree_flatten(r)
        if s != spec:
            raise ValueError(f"vmap({nm}, ...): `{nm}` returned outputs of different structures for different samples "
                             f"({spec_str(spec)} and {spec_str(s)}); vmap needs one structure for the whole batch")
        flats.append(f)
    if isinstance(results[0], Tensor) and isinstance(out_dims, tuple) and len(out_dims) == 1:
        dims = list(out_dims)
    else:
        dims = broadcast_prefix(out_dims, spec)
    if dims is None:
        raise ValueError(f"vmap({nm}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {spec_str(tree_flatten(out_dims)[1])} but "
                         f"outputs has structure {spec_str(spec)}.")
    out = []
    for j, d in enumerate(dims):
        vals = [f[j] for f in flats]
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({nm}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                             "collection of ints representing where in the outputs the vmapped dimension should "
                             f"appear. Got {d}")
        if d is None:
            if not _same(vals):
                raise ValueError(f"vmap({nm}, ...): `{nm}` can not return a BatchedTensor when out_dim is None "
                                 "(its output differs between samples)")
            out.append(vals[0])
            continue
        for v in vals:
            if not isinstance(v, Tensor):
                raise ValueError(f"vmap({nm}, ...): `{nm}` must only return Tensors, got type {type(v)}. Did you mean "
                                 "to set out_dims= to None for output?")
        n = vals[0].dim() + 1
        if d < -n or d >= n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        out.append(stack(vals, d % n))
    return tree_unflatten(out, spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """PyTorch's ``torch.func.vmap``: ``func`` mapped over a dimension of its inputs.

    ``in_dims``: an int (every positional argument mapped over that dim), or a tuple with one entry per positional
    argument, each an int, None (not mapped) or a nested tuple/list/dict matching that argument's structure.
    ``out_dims``: the same for the outputs (an int, None, or a tuple matching a tuple output). Keyword arguments are
    passed unmapped. The mapped inputs must agree on the batch size B; ``func`` sees each sample without the mapped
    dimension and must return Tensors (or pytrees of them) with the same structure for every sample; each output is
    stacked along its out_dim. An output with out_dim None must be the same for every sample.

    This runs ``func`` once per sample (B calls) and stacks the results: the values match PyTorch's, the speed does
    not (PyTorch batches the ops). ``chunk_size`` (None or a positive int) is accepted and changes nothing.
    ``randomness``: 'error' (a random draw inside ``func`` raises RuntimeError), 'different' (each sample draws its
    own numbers), 'same' (every sample sees the same numbers). Nesting works (``vmap(vmap(f))``,
    ``vmap(grad(f))`` for per-sample gradients, ``grad`` of a vmapped function).

    Raises ValueError as PyTorch's vmap does: bad ``in_dims``/``out_dims`` types or structure, an in_dim out of range
    or on a non-Tensor, no mapped Tensor, differing batch sizes, non-Tensor outputs with an int out_dim; and for a
    batch of size 0 (there is no sample to run ``func`` on). RuntimeError for an unknown ``randomness``."""
    _check_randomness_arg(randomness)
    if not (chunk_size is None or (isinstance(chunk_size, int) and chunk_size > 0)):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        flat, spec, dims, batch = _flat_in_dims(in_dims, args, func)
        if batch == 0:
            raise ValueError(f"vmap({_name(func)}): the mapped dimension has size 0; cltorch's vmap runs func once per "
                             "sample and cannot infer the output of an empty batch")
        results = []
        with _RandomGuard(randomness) as guard:
            for i in range(batch):
                if i:
                    guard.next_sample()
                sample = [a if d is None else a.select(d, i) for a, d in zip(flat, dims)]
                results.append(func(*tree_unflatten(sample, spec), **kwargs))
        return _combine(results, out_dims, func)
    return wrapped
