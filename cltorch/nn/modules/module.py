"""``Module``: the base class of every layer, with PyTorch's semantics (``torch.nn.Module``).

What users rely on, and what this file keeps:

* Registration through ``__setattr__``: a :class:`Parameter` goes to ``_parameters``, a Module to
  ``_modules``; assigning to a name already registered as a buffer replaces the buffer. ``__getattr__``
  finds them, ``__delattr__`` removes them. Each dict keeps registration order.
* Walking: ``named_parameters`` yields a module's own parameters, then its children's (depth first, in
  registration order), each object once unless ``remove_duplicate=False``.
* ``state_dict``: dotted keys; own parameters, then own persistent buffers, then each child's; values are
  detached aliases that share storage with the parameters (``keep_vars=True`` gives the parameters).
* ``load_state_dict(strict=True)``: copies under no_grad into the existing tensors (any device to any
  device, casting dtype); returns ``(missing_keys, unexpected_keys)``; raises RuntimeError listing every
  shape mismatch with the key and both shapes, and, when strict, the missing and unexpected keys.
* ``to``/``cpu``/``float``/...: swap each parameter's data in place (``p.data = new``) so the Parameter
  objects an optimizer holds stay valid; move buffers; cast only floating-point tensors; return self.
* Hooks: forward pre-hooks, forward hooks (with kwargs, prepend, handles) and full backward (pre-)hooks.
"""
import functools
import itertools
import warnings
from collections import OrderedDict, namedtuple

from ..._tensor import Tensor
from ... import _dtype as D
from ..._device import canonical
from ..._dispatch import set_grad_enabled_raw
from ..parameter import Parameter, Buffer

__all__ = ["Module", "RemovableHandle", "register_module_forward_hook", "register_module_forward_pre_hook"]


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``remove()`` (or leaving a ``with`` block) unregisters."""

    _next_id = 0

    def __init__(self, *dicts):
        self.hooks_dicts = dicts
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        for d in self.hooks_dicts:
            if d is not None:
                d.pop(self.id, None) if isinstance(d, dict) else d.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """A forward pre-hook run before every Module's own (``hook(module, args)``); returns a handle."""
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook):
    """A forward hook run after every Module's own (``hook(module, args, output)``); returns a handle."""
    h = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[h.id] = hook
    return h


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + ln for ln in lines[1:])


class _no_grad:
    def __enter__(self):
        self.prev = set_grad_enabled_raw(False)

    def __exit__(self, *exc):
        set_grad_enabled_raw(self.prev)


# ------------------------------------------------------------------------------------------------ backward hooks
class _BackwardHookState:
    """Ties one call's input and output identity nodes together (PyTorch's ``BackwardHook``).

    The outputs pass through an identity Function whose backward sees grad_output (and runs the backward
    pre-hooks, which may replace it); the inputs that require grad pass through another whose backward sees
    grad_input and runs the full backward hooks, which may replace grad_input. When no input requires grad,
    the hooks run at the output node with grad_input all None.
    """

    def __init__(self, module, n_args):
        self.module = module
        self.grad_outputs = None
        self.n_args = n_args
        self.input_hooked = False

    def run_pre_hooks(self, grads):
        for hook in list(self.module._backward_pre_hooks.values()):
            r = hook(self.module, grads)
            if r is not None:
                r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                if len(r) != len(grads):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                       f"{len(r)}, but expected {len(grads)}")
                grads = r
        return grads

    def run_hooks(self, grad_inputs):
        for hook in list(self.module._backward_hooks.values()):
            r = hook(self.module, grad_inputs, self.grad_outputs)
            if r is not None:
                r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                if len(r) != len(grad_inputs):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, but "
                                       f"expected {len(grad_inputs)}")
                grad_inputs = r
        return grad_inputs


def _identity_fn(kind):
    from ...autograd import Function

    class _Hook(Function):
        @staticmethod
        def forward(ctx, state, *tensors):
            ctx.state = state
            return tensors if len(tensors) != 1 else tensors[0]

        @staticmethod
        def backward(ctx, *grads):
            st = ctx.state
            if kind == "out":
                grads = st.run_pre_hooks(tuple(grads))
                st.grad_outputs = grads
                if not st.input_hooked:
                    st.run_hooks((None,) * st.n_args)
            else:
                grads = st.run_hooks(tuple(grads))
            return (None,) + tuple(grads)

    _Hook.__name__ = "BackwardHookFunction"
    return _Hook


@functools.lru_cache(None)
def _hook_fns():
    return _identity_fn("in"), _identity_fn("out")


def _wrap_tensors(obj, positions, new):
    """Put the tensors of ``new`` back at ``positions`` of a tuple/list or single tensor ``obj``."""
    if isinstance(obj, Tensor):
        return new[0]
    seq = list(obj)
    for i, t in zip(positions, new):
        seq[i] = t
    return tuple(seq) if isinstance(obj, tuple) else seq


# ------------------------------------------------------------------------------------------------ Module
class Module:
    """Base class for all neural network modules. Subclasses call ``super().__init__()`` first, assign
    Parameters and sub-Modules as attributes, and define ``forward``."""

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if self.call_super_init is False and (args or kwargs):
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected argument: "
                            f"{next(iter(kwargs)) if kwargs else args[0]!r}")
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", OrderedDict())
        sa(self, "_buffers", OrderedDict())
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", OrderedDict())
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", OrderedDict())
        sa(self, "_forward_hooks_always_called", OrderedDict())
        sa(self, "_backward_hooks", OrderedDict())
        sa(self, "_backward_pre_hooks", OrderedDict())
        sa(self, "_state_dict_hooks", OrderedDict())
        sa(self, "_state_dict_pre_hooks", OrderedDict())
        sa(self, "_load_state_dict_pre_hooks", OrderedDict())
        sa(self, "_load_state_dict_post_hooks", OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ registration
    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer (a tensor that is state but not a parameter, e.g. BatchNorm's running_mean).
        Non-persistent buffers are left out of ``state_dict``. ``tensor=None`` registers an empty slot."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = Tensor._make(tensor._storage, tensor._shape, tensor._stride, tensor._offset,
                                  requires_grad=tensor.requires_grad)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Add a Parameter (or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__module__}.{type(param).__name__}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             f"explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        """Add a child module under ``name`` (``None`` registers an empty slot)."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__module__}.{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__

        def remove_from(*dicts_or_sets):
            for s in dicts_or_sets:
                if name in s:
                    if isinstance(s, dict):
                        del s[name]
                    else:
                        s.discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as parameter "
                                f"'{name}' (torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as child module "
                                f"'{name}' (torch.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer) or (buffers is not None and name in buffers):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as buffer "
                                f"'{name}' (torch.nn.Buffer, torch.Tensor or None expected)")
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, self._parameters, self._modules)
            self.register_buffer(name, value, persistent)
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)
        for k in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                  "_backward_pre_hooks", "_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            if k not in self.__dict__:
                self.__dict__[k] = OrderedDict()
        if "_non_persistent_buffers_set" not in self.__dict__:
            self.__dict__["_non_persistent_buffers_set"] = set()

    # ------------------------------------------------------------------ walking the tree
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) pairs: own parameters, then each child's, depth first, in registration order."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for self (name ``prefix``) and every descendant, depth first, each once unless
        ``remove_duplicate=False``."""
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        """The module at dotted path ``target`` ("" is self). AttributeError names the missing part."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Replace (or, unless strict, add) the submodule at dotted path ``target``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        parent = self.get_submodule(".".join(atoms[:-1]))
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target):
        """The Parameter at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return p

    def get_buffer(self, target):
        """The buffer at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return mod._buffers[name]

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # ------------------------------------------------------------------ state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer under dotted keys. Values are detached
        tensors sharing storage with the module's (``keep_vars=True``: the Parameter objects themselves)."""
        if args:  # the deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            r = hook(self, destination, prefix, {})
            if r is not None:
                destination = r
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = itertools.chain(self._parameters.items(), persistent.items())
        local_state = {k: v for k, v in local if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(value)}")
                continue
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with _no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            new = value if isinstance(value, Parameter) else Parameter(value, param.requires_grad)
                            if not isinstance(value, Parameter):
                                new.requires_grad = param.requires_grad
                            setattr(self, name, new)
                        else:
                            self._buffers[name] = value
                    else:
                        param.copy_(value)
            except Exception as ex:  # noqa: BLE001 - reported with the key, as PyTorch does
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.shape} and whose dimensions in the checkpoint are {value.shape}, an "
                                  f"exception occurred : {ex.args}.")
        extra_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            else:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    input_name = key[len(prefix):].split(".", 1)[0]
                    if input_name not in self._modules and input_name not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and persistent buffers from ``state_dict`` (any device, cast to each tensor's
        dtype). Returns ``(missing_keys, unexpected_keys)``. Raises RuntimeError naming every key whose
        shape differs (with both shapes) and, when ``strict``, every missing or unexpected key.
        ``assign=True`` makes the module's tensors the state dict's (keeping requires_grad)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, sd, prefix=""):
            meta = {} if metadata is None else metadata.get(prefix[:-1], {})
            module._load_from_state_dict(sd, prefix, meta, True, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in sd.items() if k.startswith(cp)}, cp)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, _IncompatibleKeys(missing, unexpected))

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(self._get_name(),
                                                                                    "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after this module's load_state_dict step; returns a handle."""
        h = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[h.id] = hook
        return h

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing, unexpected, error_msgs)``."""
        h = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[h.id] = functools.partial(hook, self)
        return h

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after this module's state_dict step."""
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = hook
        return h

    _register_state_dict_hook = register_state_dict_post_hook

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before this module's state_dict step."""
        h = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[h.id] = hook
        return h

    # ------------------------------------------------------------------ modes and conversion
    def train(self, mode=True):
        """Set training mode on self and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None (default), or zero them in place."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def share_memory(self):
        """Moves every parameter, gradient and buffer into shared memory in place (``Tensor.share_memory_``),
        so processes started with ``cltorch.multiprocessing`` that receive the module update these very
        tensors (Hogwild training). Returns self. Raises RuntimeError for a module on an OpenCL device,
        whose memory cannot be shared between processes."""
        return self._apply(lambda t: t.share_memory_())

    def _apply(self, fn, recurse=True):
        """Apply ``fn`` to every parameter (swapping its data in place, so the object survives), its grad,
        and every buffer (replaced)."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            with _no_grad():
                new = fn(p)
            if new is not p:
                p.data = new
            if p.grad is not None:
                with _no_grad():
                    g = fn(p.grad)
                if g is not p.grad:
                    p.grad.data = g
        for key, b in self._buffers.items():
            if b is not None:
                with _no_grad():
                    self._buffers[key] = fn(b)
        return self

    def apply(self, fn):
        """Call ``fn(m)`` on every child (recursively), then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``, ``to(memory_format=...)``: move
        parameters and buffers, casting only floating-point ones to ``dtype`` and laying 4-d and 5-d ones out in
        ``memory_format`` (as PyTorch: channels_last on a 5-d tensor raises RuntimeError); returns self
        (Parameter objects are kept). Raises TypeError for a non-floating dtype."""
        non_blocking = kwargs.pop("non_blocking", False)
        memory_format = kwargs.pop("memory_format", None)
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments: {sorted(kwargs)}")
        for a in args:
            if isinstance(a, D.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):
                non_blocking = a
            elif a is not None:
                device = a
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                f"dtype={dtype}")
        if device is not None:
            device = canonical(device)

        def convert(t):
            want_dt = dtype if (dtype is not None and t.is_floating_point()) else None
            if memory_format is not None and t.dim() in (4, 5):
                return t.to(device=device, dtype=want_dt, non_blocking=non_blocking, memory_format=memory_format)
            return t.to(device=device, dtype=want_dt, non_blocking=non_blocking)

        return self._apply(convert)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cl(self, device=None):
        """Move to the OpenCL device ``device`` (an index or a device string; default "cl")."""
        dev = "cl" if device is None else (f"cl:{device}" if isinstance(device, int) else device)
        return self._apply(lambda t: t.to(dev))

    def cuda(self, device=None):
        raise RuntimeError("cltorch has no CUDA device; use .to('cl') or .cl()")

    def type(self, dst_type):
        """Cast every parameter and buffer (floating or not) to ``dst_type``."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        raise TypeError("cltorch has no bfloat16 dtype")

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with_kwargs) before forward; it may return
        new args (a tuple or a single value) or, with kwargs, a new ``(args, kwargs)``."""
        h = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[h.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[h.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) after forward; it may
        return a replacement output. ``always_call``: also run when forward raises."""
        h = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs, self._forward_hooks_always_called)
        self._forward_hooks[h.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[h.id] = True
        if always_call:
            self._forward_hooks_always_called[h.id] = True
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the module's tensor
        inputs are computed (grad_input entries are None for inputs that need no gradient); it may return a
        replacement grad_input tuple. Do not modify the arguments in place."""
        h = RemovableHandle(self._backward_hooks)
        self._backward_hooks[h.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` when the gradients with respect to the module's outputs are known; it
        may return a replacement grad_output tuple."""
        h = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[h.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_backward_hook(self, hook):
        """Deprecated in PyTorch; here the same as :meth:`register_full_backward_hook`."""
        warnings.warn("register_backward_hook is deprecated; using register_full_backward_hook semantics",
                      FutureWarning, stacklevel=2)
        return self.register_full_backward_hook(hook)

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks
                or _global_forward_pre_hooks or _global_forward_hooks):
            return self.forward(*args, **kwargs)
        for hid, hook in itertools.chain(_global_forward_pre_hooks.items(), self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if isinstance(r, tuple) and len(r) == 2:
                        args, kwargs = r
                    else:
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {r}.")
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        state = None
        if self._backward_hooks or self._backward_pre_hooks:
            from ..._dispatch import is_grad_enabled
            if is_grad_enabled():
                in_fn, _ = _hook_fns()
                pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
                state = _BackwardHookState(self, len(pos))
                if any(args[i].requires_grad for i in pos):
                    new = in_fn.apply(state, *[args[i] for i in pos])
                    new = (new,) if isinstance(new, Tensor) else tuple(new)
                    args = _wrap_tensors(args, pos, new)
                    state.input_hooked = True
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in self._forward_hooks.items():
                if hid in self._forward_hooks_always_called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001 - the forward's error wins, as in PyTorch
                        pass
            raise
        for hid, hook in itertools.chain(_global_forward_hooks.items(), self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                r = hook(self, args, kwargs, result)
            else:
                r = hook(self, args, result)
            if r is not None:
                result = r
        if state is not None:
            _, out_fn = _hook_fns()
            if isinstance(result, Tensor):
                outs, pos = [result], [0]
            elif isinstance(result, (tuple, list)):
                pos = [i for i, r in enumerate(result) if isinstance(r, Tensor)]
                outs = [result[i] for i in pos]
            else:
                outs, pos = [], []
            if any(o.requires_grad for o in outs):
                new = out_fn.apply(state, *outs)
                new = (new,) if isinstance(new, Tensor) else tuple(new)
                result = _wrap_tensors(result, pos, new)
        return result

    __call__ = _call_impl

    # ------------------------------------------------------------------ repr
    def extra_repr(self):
        """Extra text inside ``Name(...)`` of the repr; subclasses override it."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = []
        for key, m in self._modules.items():
            children.append("(" + key + "): " + _addindent(repr(m), 2))
        body = lines + children
        s = self._get_name() + "("
        if body:
            if len(lines) == 1 and not children:
                s += lines[0]
            else:
                s += "\n  " + "\n  ".join(body) + "\n"
        return s + ")"

    def compile(self, *args, **kwargs):
        """No compiler here: a no-op kept for scripts that call it."""
        return None
