"""Pruning (PyTorch's ``torch.nn.utils.prune``): zero parts of a module's tensor through a mask.

Pruning ``module.<name>`` moves the parameter to ``module.<name>_orig`` (a Parameter, still what the optimizer
trains), stores the 0/1 mask as the buffer ``module.<name>_mask`` (same shape and dtype as the tensor) and makes
``module.<name>`` a plain attribute ``<name>_mask * <name>_orig``, recomputed before every forward by a forward
pre-hook (the pruning method object itself). State-dict keys are therefore PyTorch's: ``weight_orig`` among the
parameters, ``weight_mask`` among the buffers. Pruning the same tensor again combines the methods in a
:class:`PruningContainer`: the new method sees only the entries (unstructured) or the channels (structured) that
are still unpruned, and its mask is multiplied into the old one. :func:`remove` makes the pruning permanent
(``<name>`` becomes a Parameter holding the masked values; ``_orig``, ``_mask`` and the hook go).

Amounts: a float in [0, 1] is a fraction (``round(amount * n)`` entries or channels), an int a count. Entries to
prune are chosen with ``topk`` of the scores (``|t|`` for L1, the Ln norm of each channel for Ln-structured,
uniform random numbers for the random methods); with ties the chosen entries may differ from PyTorch's.

Errors (as PyTorch): TypeError for an amount that is not a real number; ValueError for a negative count, a
fraction outside [0, 1] or a count above the tensor's size; ValueError for structured pruning of a 0-d or 1-d
tensor; IndexError for a ``dim`` out of range; ValueError from :func:`remove` on a tensor that is not pruned.
"""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import cltorch as torch
from ..parameter import Parameter
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


# ---------------------------------------------------------------------------------------------- validation
def _check_amount_type(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    is_count = isinstance(amount, numbers.Integral)
    if (is_count and amount < 0) or (not is_count and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _n_to_prune(amount, size):
    """How many of ``size`` entries (or channels) ``amount`` prunes; a count above ``size`` raises ValueError."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _check_structured(t, dim):
    if t.dim() <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {tuple(t.shape)} with {t.dim()} dims")
    if dim >= t.dim() or dim < -t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _channel_slices(ndim, dim, index):
    sl = [slice(None)] * ndim
    sl[dim] = index
    return tuple(sl)


# ---------------------------------------------------------------------------------------------- base classes
class BasePruningMethod(ABC):
    """A way of choosing a mask. Subclasses set ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` with a
    ``dim`` attribute, or ``"global"``) and define ``compute_mask(t, default_mask)``, which returns a mask of
    ``t``'s shape that keeps ``default_mask``'s zeros. An instance applied to a module is that module's forward
    pre-hook for the tensor ``_tensor_name``."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask (shape of ``t``) for the importance scores ``t``, on top of ``default_mask``."""

    def apply_mask(self, module):
        """``<name>_mask * <name>_orig`` (the mask cast to the tensor's dtype)."""
        if not hasattr(self, "_tensor_name"):
            raise AttributeError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, chained after any pruning already on it.
        ``importance_scores`` (shape of the tensor; default the tensor) decide which entries go. Returns the
        method now registered as the hook (a :class:`PruningContainer` when the tensor was pruned before)."""
        previous = [(k, h) for k, h in module._forward_pre_hooks.items()
                    if isinstance(h, BasePruningMethod) and h._tensor_name == name]
        if len(previous) > 1:
            raise RuntimeError(f"more than one pruning hook acts on the parameter '{name}' of {module}")
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if previous:
            key, old = previous[0]
            del module._forward_pre_hooks[key]
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                method = old
            else:
                method = PruningContainer(old, method)
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise ValueError(f"importance_scores should have the same shape as parameter {name} of {module}: "
                                 f"got {tuple(importance_scores.shape)}, expected {tuple(orig.shape)}")
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = torch.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(memory_format=torch.contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:                       # put the parameter back as it was
                module.__dict__.pop(name, None)
                module._buffers.pop(name + "_mask", None)
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask computed from ``importance_scores`` (default ``t``) on top of ``default_mask``
        (default all ones); no module involved."""
        if importance_scores is not None and importance_scores.shape != t.shape:
            raise ValueError("importance_scores should have the same shape as tensor t: got "
                             f"{tuple(importance_scores.shape)} and {tuple(t.shape)}")
        scores = t if importance_scores is None else importance_scores
        default_mask = torch.ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``module.<name>`` becomes the Parameter ``<name>_orig`` holding the masked
        values; ``<name>_orig`` and ``<name>_mask`` are removed (the caller removes the hook)."""
        if not hasattr(self, "_tensor_name"):
            raise AttributeError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        pruned = self.apply_mask(module)
        module.__dict__.pop(name, None)
        orig = module._parameters.pop(name + "_orig")
        orig.data = pruned.data
        module._buffers.pop(name + "_mask", None)
        module._non_persistent_buffers_set.discard(name + "_mask")
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """Successive pruning methods on one tensor. ``compute_mask`` applies the last one added to what the earlier
    ones left: the still-unpruned entries (``"unstructured"``), the channels along its ``dim`` with any nonzero
    mask entry (``"structured"``), or the whole tensor (``"global"``), and writes its result there."""

    def __init__(self, *args):
        self._pruning_methods = tuple()
        if len(args) == 1 and not isinstance(args[0], BasePruningMethod) and isinstance(args[0], Iterable):
            args = tuple(args[0])
        for m in args:
            if not hasattr(self, "_tensor_name") and hasattr(m, "_tensor_name"):
                self._tensor_name = m._tensor_name
            self.add_pruning_method(m)

    def add_pruning_method(self, method):
        """Append ``method`` (a BasePruningMethod on the same tensor; TypeError / ValueError otherwise)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and getattr(self, "_tensor_name", None) != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{getattr(self, '_tensor_name', None)}' to PruningContainer. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            where = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute "
                                     "`dim` defined.")
            nd = t.dim()
            dim = method.dim + nd if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {nd}")
            others = [d for d in range(nd) if d != dim]
            live = default_mask.sum(dim=others) != 0
            where = _channel_slices(nd, dim, live)
        elif kind == "global":
            where = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        part = method.compute_mask(t[where], default_mask=default_mask[where])
        mask[where] = part.to(dtype=mask.dtype)
        return mask


# ---------------------------------------------------------------------------------------------- methods
class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (the tensor gets ``_orig`` / ``_mask`` and the hook)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _zero_top(default_mask, scores, k, largest):
    """A contiguous copy of ``default_mask`` with the ``k`` entries of largest (or smallest) ``scores`` zeroed."""
    mask = default_mask.clone(memory_format=torch.contiguous_format)
    if k:
        mask.view(-1)[torch.topk(scores.reshape(-1), k=k, largest=largest).indices] = 0
    return mask


class RandomUnstructured(BasePruningMethod):
    """Zero ``amount`` entries chosen uniformly at random (among those not pruned yet)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount_type(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _zero_top(default_mask, torch.rand_like(t), _n_to_prune(self.amount, t.nelement()), largest=True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Zero the ``amount`` entries of smallest absolute value (of the importance scores)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount_type(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _zero_top(default_mask, torch.abs(t), _n_to_prune(self.amount, t.nelement()), largest=False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Zero ``amount`` whole channels along ``dim`` (default -1), chosen uniformly at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount_type(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        n = t.shape[self.dim]
        k = _n_to_prune(self.amount, n)
        if k == 0:
            return default_mask
        keep = torch.topk(torch.rand(n, device=t.device), k=n - k).indices if k < n else None
        mask = torch.zeros_like(t)
        if keep is not None:
            mask[_channel_slices(t.dim(), self.dim, keep)] = 1
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Zero the ``amount`` channels along ``dim`` of smallest Ln norm (``n``: as ``torch.norm``'s ``p``: an int,
    float, ``inf``, ``-inf``, ``'fro'`` or ``'nuc'``), the norm taken over all the other dims."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount_type(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        size = t.shape[self.dim]
        k = _n_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        dim = self.dim + t.dim() if self.dim < 0 else self.dim
        norms = torch.norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        mask = torch.zeros_like(t)
        if size - k:
            keep = torch.topk(norms, k=size - k, largest=True).indices
            mask[_channel_slices(t.dim(), dim, keep)] = 1
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """The given 0/1 ``mask`` (shape of the tensor), multiplied into any earlier mask."""
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise ValueError(f"mask of shape {tuple(self.mask.shape)} does not match the tensor's "
                             f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype, device=default_mask.device)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------------------------------------- functions
def identity(module, name):
    """Register pruning machinery on ``module.<name>`` with an all-ones mask. Returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Zero ``amount`` random entries of ``module.<name>``. Returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Zero the ``amount`` entries of ``module.<name>`` of smallest ``|importance_scores|`` (default the tensor).
    Returns ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Zero ``amount`` random channels of ``module.<name>`` along ``dim``. Returns ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Zero the ``amount`` channels along ``dim`` of lowest Ln norm (of ``importance_scores``, default the
    tensor). Returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune several tensors together: their scores (``importance_scores[(module, name)]``, default the tensors)
    and current masks are flattened into one vector, ``pruning_method(**kwargs)`` (an ``"unstructured"`` method
    class, e.g. ``L1Unstructured`` with ``amount``) picks entries over all of them, and each tensor gets its part
    of the mask through :func:`custom_from_mask`. ``parameters``: an iterable of ``(module, name)``. Returns None.
    Raises TypeError for a non-iterable ``parameters``, a non-dict ``importance_scores`` or a method that is not
    unstructured."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    masks = parameters_to_vector([getattr(m, n + "_mask", None) if (n + "_mask") in m._buffers
                                  else torch.ones_like(getattr(m, n)) for m, n in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    final = container.compute_mask(scores, masks)
    start = 0
    for m, n in parameters:
        p = getattr(m, n)
        custom_from_mask(m, n, mask=final[start:start + p.numel()].view_as(p))
        start += p.numel()


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` with the given ``mask`` (0/1, the tensor's shape). Returns ``module``."""
    CustomFromMask.apply(module, name, mask=mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (see :meth:`BasePruningMethod.remove`) and drop its hook.
    Returns ``module``; ValueError when ``module.<name>`` is not pruned."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """True when ``module`` or any submodule has a pruning hook."""
    return any(isinstance(h, BasePruningMethod)
               for _, sub in module.named_modules() for h in sub._forward_pre_hooks.values())
