"""``Optimizer``: the base class of cltorch's optimizers, with PyTorch's semantics (``torch.optim.Optimizer``).

* ``params`` is an iterable of Tensors, of ``(name, Tensor)`` pairs (as ``named_parameters()`` yields;
  the names are kept in ``group["param_names"]``), or of dicts, each a param group with its own options.
  A Tensor alone raises TypeError, an empty list raises ValueError, a parameter in two groups raises
  ValueError, a set raises TypeError (its order is not stable), mixing named and unnamed groups raises
  ValueError.
* ``state`` maps each parameter to its per-parameter state (a dict of Tensors; ``"step"`` is a 0-d
  float32 cpu Tensor, as in PyTorch).
* ``state_dict()`` packs parameters as indices (their order across the groups) and
  ``load_state_dict()`` maps them back; state tensors move to each parameter's device and floating dtype,
  so a state dict saved on one device loads on another. A state dict whose group count or group sizes
  differ raises ValueError with PyTorch's message.
* ``step(closure=None)`` returns ``closure()``'s value when a closure is given.
* ``zero_grad(set_to_none=True)``.
* Step hooks (``register_step_pre_hook``/``register_step_post_hook``), state-dict hooks.

The update itself is one fused OpenCL kernel per group of parameters (see ``_fused.py``); subclasses
describe their algorithm through :class:`FusedOptimizer`'s hooks, and ``_apply`` launches it.
"""
import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

from . import _fused

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyper-parameter that every param group must give (e.g. SGD's old ``lr``)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _Handle:
    """Removable handle of a registered hook (``handle.remove()``)."""

    _next = 0

    def __init__(self, store):
        self._store = store
        self.id = _Handle._next
        _Handle._next += 1

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


_global_pre_hooks = OrderedDict()
_global_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """Register ``hook(optimizer, args, kwargs)`` to run before every optimizer's ``step``."""
    h = _Handle(_global_pre_hooks)
    _global_pre_hooks[h.id] = hook
    return h


def register_optimizer_step_post_hook(hook):
    """Register ``hook(optimizer, args, kwargs)`` to run after every optimizer's ``step``."""
    h = _Handle(_global_post_hooks)
    _global_post_hooks[h.id] = hook
    return h


def _tensor_cls():
    from .._tensor import Tensor
    return Tensor


def _is_tensor(x):
    return isinstance(x, _tensor_cls())


def _no_grad():
    from .._tensor import _no_grad as ng
    return ng()


def _with_hooks(step):
    """Wrap a subclass's ``step`` so step pre/post hooks run around it (PyTorch's profile_hook_step)."""
    if getattr(step, "_cltorch_hooked", False):
        return step

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in chain(_global_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if isinstance(res, tuple) and len(res) == 2:
                    args, kwargs = res
                else:
                    raise RuntimeError(f"{step} must return None or a tuple of (new_args, new_kwargs), but got "
                                       f"{res}.")
        out = step(self, *args, **kwargs)
        for hook in chain(self._optimizer_step_post_hooks.values(), _global_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._cltorch_hooked = True
    return wrapper


class Optimizer:
    """Base class for all optimizers.

    Args:
        params (iterable): Tensors, ``(name, Tensor)`` pairs, or dicts defining param groups.
        defaults (dict): default values of the optimization options, used by groups that don't set them.
    """

    _group_defaults = {}   # per-group options a subclass fills in when unpickling an older state

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if _is_tensor(params):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        self.state = defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ------------------------------------------------------------------ pickling, repr
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self.defaults.setdefault("differentiable", False)
        for group in self.param_groups:   # options added after a state was pickled get their defaults
            for k, v in self._group_defaults.items():
                group.setdefault(k, v)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group):
        """Add a param group (a dict with ``"params"`` and optional per-group options).

        Raises TypeError for a non-dict, a set of params, or a non-Tensor param; ValueError for a non-leaf
        Tensor, a missing required option, a parameter already in another group, or mixing named and
        unnamed groups. A group listing one parameter twice warns, as in PyTorch.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if _is_tensor(params):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        tensors, names = [], []
        for p in params:
            if isinstance(p, tuple):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for p in tensors:
            if not _is_tensor(p):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not self.defaults.get("differentiable", None) and not (p.is_leaf or getattr(p, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
            if ("param_names" in param_group) != ("param_names" in g):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. cannot add param group "
                                 f"{txt} to the optimizer")
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ grads
    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None (default), or to zero in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        """Take one optimization step; returns ``closure()``'s loss when a closure is given."""
        raise NotImplementedError

    # ------------------------------------------------------------------ hooks
    def _register(self, store, hook, prepend=False):
        h = _Handle(store)
        store[h.id] = hook
        if prepend:
            store.move_to_end(h.id, last=False)
        return h

    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` before each ``step``; may return new ``(args, kwargs)``."""
        return self._register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ------------------------------------------------------------------ state dict
    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``.

        Parameters are numbered in order across the groups. The state tensors are references (not copies),
        as in PyTorch.
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if _is_tensor(k) else k): v for k, v in self.state.items()}
        sd = {"state": state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    def load_state_dict(self, state_dict):
        """Load a state returned by :meth:`state_dict` (possibly saved on another device).

        State tensors move to their parameter's device (and, when floating, dtype) and are made contiguous
        (a tensor already there is used as is, as in PyTorch); ``"step"`` is copied to a new 0-d cpu tensor.
        Raises ValueError when the number of groups or a group's size differs.
        """
        state_dict = dict(state_dict)
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if _is_tensor(value):
                if key == "step":
                    return _as_step(value)
                if value.dtype.is_floating_point and param.dtype.is_floating_point:
                    value = value.to(device=param.device, dtype=param.dtype)
                else:
                    value = value.to(device=param.device)
                return value.contiguous()
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if key == "step" and isinstance(value, (int, float)):
                return _as_step(value)
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = cast(p, v)
            else:
                state[k] = v

        def update_group(group, new):
            new["params"] = group["params"]
            if "param_names" in group and "param_names" not in new:
                new["param_names"] = group["param_names"]
            return new

        self.__setstate__({"state": state,
                           "param_groups": [update_group(g, s) for g, s in zip(groups, saved_groups)]})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    # ------------------------------------------------------------------ helpers for subclasses
    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        from .. import enable_grad
        with enable_grad():
            return closure()

    def _grads_of(self, group):
        """(param, grad) for the group's params whose grad is not None; checks device and dtype."""
        out = []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if getattr(g, "is_sparse", False):
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
            if g.device != p.device:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                                   f"{p.device} and {g.device}! (parameter and its grad)")
            if g.shape != p.shape:
                raise RuntimeError(f"parameter of shape {list(p.shape)} has a grad of shape {list(g.shape)}")
            out.append((p, g))
        return out

    # The fused-kernel optimizers (:class:`FusedOptimizer`) split a step in two: ``_group_plan(group)``, the host
    # half, and ``_apply``, which launches it. Optimizers composed of tensor ops leave ``_group_plan`` None (a
    # compiled replay then re-runs their step without launching).
    _group_plan = None

    def _apply(self, algo, flags, items):
        """Run the fused update of ``algo`` on ``items``: a list of ``(param, grad, states, scalars)``.

        Items sharing device, dtype and scalars go through one multi-tensor launch (chunked by the kernel's
        slot count). A parameter that the kernel cannot update in place (non-contiguous, or a dtype other
        than float32/float64) is updated through contiguous (float32) copies that are copied back.
        """
        buckets = {}
        for p, g, states, scalars in items:
            key = (p.device, p.dtype, tuple(scalars))
            buckets.setdefault(key, []).append((p, g, states))
        for (_, _, scalars), its in buckets.items():
            direct, copied = [], []
            for it in its:
                (direct if _fused.fusable(*it) else copied).append(it)
            if direct:
                _fused.fused_step(algo, flags, [it[0] for it in direct], [it[1] for it in direct],
                                  [it[2] for it in direct], scalars)
            for p, g, states in copied:
                self._apply_copied(algo, flags, p, g, states, scalars)

    @staticmethod
    def _apply_copied(algo, flags, p, g, states, scalars):
        from .. import _dtype as D
        if getattr(p.dtype, "is_complex", False):
            raise NotImplementedError("complex parameters are not supported by cltorch.optim")
        if not p.dtype.is_floating_point:
            raise RuntimeError(f"cltorch.optim updates floating-point parameters; got {p.dtype}")
        ct = p.dtype if p.dtype in (D.float32, D.float64) else D.float32
        with _no_grad():
            pc = p.to(dtype=ct).contiguous()
            gc = g.to(device=p.device, dtype=ct).contiguous()
            sc = [s.to(device=p.device, dtype=ct).contiguous() for s in states]
            _fused.fused_step(algo, flags, [pc], [gc], [sc], scalars)
            if pc is not p:
                p.copy_(pc)
            for s, c in zip(states, sc):
                if c is not s:
                    s.copy_(c)


class FusedOptimizer(Optimizer):
    """Base of the optimizers whose update is one fused kernel of ``_fused.ALGOS`` (SGD, Adam/AdamW, NAdam,
    RAdam, RMSprop, Adagrad, Adamax).

    ``step`` runs ``closure()`` (with grad), then per group ``_group_plan`` (the host half: makes missing state,
    advances the host counters, computes the kernel's scalars; launches nothing) and ``_apply`` (the launches).
    A compiled replay (``cltorch._capture.compile``) calls the same ``_group_plan`` and gives its scalars to the
    recorded launches, so eager and replay advance the state and compute the scalars by one code path.

    A subclass states only what differs:

    * ``_algo``: the kernel's algorithm (a key of ``_fused.ALGOS``); the state tensors it needs are
      ``_fused.state_names(_algo, flags)``, made on first need by ``_new_state`` (zeros unless overridden).
    * ``_counters``: ``(name, initial value)`` of the per-parameter host counters (0-d float32 cpu tensors, as
      in PyTorch) made on first sight, before the state tensors; ``(("step", 0.0),)`` unless overridden.
    * ``_plan_hyper(group) -> (flags, h)``: the kernel's flags and the group's hyper-parameters ``h``
      (anything; passed through to the two methods below), computed once per group and step.
    * ``_advance(st, h, fresh) -> key``: advances the counters of one parameter's state ``st`` (None when the
      algorithm keeps no state) and returns a hashable key of what the scalars depend on; ``fresh`` is True when
      a state tensor was just made. Default: ``state["step"] += 1``, the key is the new step number.
    * ``_plan_scalars(h, key)``: the kernel's scalars (ordered as ``_fused.ALGOS[_algo][1]``), computed once per
      distinct key in a group (parameters sharing them share launches, see ``_apply``).
    """

    _algo = None
    _counters = (("step", 0.0),)

    def step(self, closure=None):
        """One optimization step over every parameter with a gradient; returns ``closure()``'s loss if given.

        Raises RuntimeError for a sparse gradient, a gradient on another device or of another shape, or a
        non-floating parameter; NotImplementedError for complex parameters."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            self._apply(*self._group_plan(group))
        return loss

    def _group_plan(self, group):
        """The host half of one step for ``group``: ``(algo, flags, items)`` with items ``[(param, grad, states,
        scalars)]`` in the group's order (parameters without a gradient left out); launches nothing."""
        flags, h = self._plan_hyper(group)
        names = _fused.state_names(self._algo, flags)
        counters = self._counters
        keeps = bool(names or counters)
        cache = {}
        items = []
        for p, g in self._grads_of(group):
            st, fresh = None, False
            if keeps:
                st = self.state[p]
                for name, init in counters:
                    if name not in st:
                        st[name] = _as_step(init)
                for name in names:
                    if st.get(name) is None:      # (a torch SGD state dict may hold momentum_buffer=None)
                        st[name] = self._new_state(p, name, group)
                        fresh = True
            key = self._advance(st, h, fresh)
            sc = cache.get(key)
            if sc is None:
                sc = cache[key] = self._plan_scalars(h, key)
            items.append((p, g, [st[n] for n in names] if names else [], sc))
        return self._algo, flags, items

    def _plan_hyper(self, group):
        raise NotImplementedError(f"{type(self).__name__} must define _plan_hyper")

    def _plan_scalars(self, h, key):
        raise NotImplementedError(f"{type(self).__name__} must define _plan_scalars")

    @staticmethod
    def _advance(st, h, fresh):
        return _bump_step(st["step"])

    @staticmethod
    def _new_state(p, name, group):
        return _zeros_like(p)


def _typename(x):
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ not in ("builtins",) else t.__qualname__


# ---------------------------------------------------------------------- step counters
def _as_step(value):
    """A new 0-d float32 cpu tensor holding ``value`` (PyTorch keeps ``state["step"]`` so). Loading a state
    dict copies its step counters, so two optimizers loaded from one dict never share a counter."""
    from .. import tensor, float32
    if _is_tensor(value):
        value = value.item()
    return tensor(float(value), dtype=float32)


def _step_value(t):
    """The value of a step counter (a 0-d tensor) without waiting for any queue when it is on the host."""
    st = t._storage
    if st.host is not None:
        return float(st.host[t._offset])
    return float(t.item())


def _bump_step(t):
    """``t += 1`` for a step counter; returns the new value. Host counters are written directly."""
    st = t._storage
    if st.host is not None:
        v = float(st.host[t._offset]) + 1.0
        st.host[t._offset] = v
        st.version += 1
        return v
    v = float(t.item()) + 1.0
    t.fill_(v)
    return v


def _zeros_like(p):
    """A contiguous zero tensor with p's shape, dtype and device."""
    from .. import zeros
    return zeros(p.shape, dtype=p.dtype, device=p.device)


def _full_like(p, value):
    from .. import full
    return full(p.shape, value, dtype=p.dtype, device=p.device)
