"""The restricted unpickler behind ``load(weights_only=True)``: it runs only allowlisted opcodes and
calls only allowlisted globals (our own implementation over the pickle opcode set, with the semantics of
torch's ``weights_only`` unpickler)."""
import _compat_pickle
import collections
import pickle
import struct

from . import _allowlist
from ._format import _STORAGE_DTYPE


class _StorageType:
    """Stands for ``torch.<Name>Storage`` in a pickle."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPE.get(name, "uint8" if name == "UntypedStorage" else None)

    def __repr__(self):
        return f"torch.{self.name}"


class _Marker:
    """Stands for an allowed torch class (``torch.Tensor``, ``torch.nn.Parameter``)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_TENSOR_CLS = _Marker("torch.Tensor")
_PARAM_CLS = _Marker("torch.nn.parameter.Parameter")




class _SafeUnpickler:
    """An unpickler that runs only allowlisted opcodes and calls only allowlisted functions.

    Our own implementation over the pickle opcode set (the same design as torch's ``weights_only``
    unpickler). Supports protocols 0-5's binary opcodes for None/bool/int/float/str/bytes, tuples,
    lists, dicts, sets, memo, GLOBAL/STACK_GLOBAL (allowlist), REDUCE/NEWOBJ (allowlisted callables,
    and the functions/classes the user allowed with ``add_safe_globals``), BUILD (on an OrderedDict, and on
    instances of allowed classes) and BINPERSID (storages only). Everything else raises
    ``pickle.UnpicklingError``.
    """

    def __init__(self, data, persistent_load, allowed, user_global=lambda module, name: None):
        """``allowed(module, name)``: the default allowlist; ``user_global(module, name)``: a global the
        user allowed (see ``add_safe_globals``) that is not found under its own name (a torch name of a
        cltorch class); both return None for a global that is not allowed."""
        self.data = memoryview(data)
        self.user = _allowlist.user_allowed()
        self.user_global = user_global
        self.pos = 0
        self.persistent_load = persistent_load
        self.allowed = allowed
        self.memo = {}
        self.stack = []
        self.marks = []

    def _read(self, n):
        p = self.pos
        if n < 0 or p + n > len(self.data):
            raise pickle.UnpicklingError("pickle data was truncated")
        self.pos = p + n
        return self.data[p:p + n]

    def _line(self):
        d = self.data
        end = bytes(d[self.pos:self.pos + 512]).find(b"\n")
        if end < 0:
            raise pickle.UnpicklingError("pickle data was truncated (GLOBAL name)")
        s = bytes(d[self.pos:self.pos + end]).decode("utf-8")
        self.pos += end + 1
        return s

    def _pop_mark(self):
        if not self.marks:
            raise pickle.UnpicklingError("pickle: unbalanced MARK")
        items = self.stack
        self.stack = self.marks.pop()
        return items

    def _find(self, module, name):
        if (module, name) in _compat_pickle.NAME_MAPPING:       # Python 2 names (protocol 2 writes them)
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        if module in _allowlist._BLOCKED_MODULES:
            raise _allowlist.refusal(module, name)
        obj = self.allowed(module, name)
        if obj is None:
            obj = self.user.get(f"{module}.{name}")
        if obj is None:
            obj = self.user_global(module, name)
        if obj is None:
            raise _allowlist.refusal(module, name)
        return obj

    def load(self):
        """The unpickled object; ``pickle.UnpicklingError`` for anything not allowed or malformed."""
        st = None
        try:
            while True:
                op = self._read(1)[0]
                st = self.stack
                if op == 0x2E:        # STOP
                    if len(st) != 1 or self.marks:
                        raise pickle.UnpicklingError("pickle: malformed stream at STOP")
                    return st[0]
                h = _OPS.get(op)
                if h is None:
                    raise pickle.UnpicklingError(f"Unsupported pickle opcode {bytes([op])!r} at byte {self.pos - 1} "
                                                 "(not allowed when loading with weights_only=True)")
                h(self)
        except (pickle.UnpicklingError, RuntimeError, OSError, MemoryError):
            raise
        except Exception as e:
            if getattr(e, "_cltorch_passthrough", False):    # raised by the user's map_location callable
                raise
            raise pickle.UnpicklingError(f"malformed pickle data at byte {self.pos}: {type(e).__name__}: {e}") \
                from None

    # -- opcode handlers
    def op_proto(self):
        if self._read(1)[0] > 5:
            raise pickle.UnpicklingError("unsupported pickle protocol")

    def op_frame(self):
        self._read(8)

    def op_mark(self):
        self.marks.append(self.stack)
        self.stack = []

    def op_pop(self):
        if self.stack:
            self.stack.pop()
        else:
            self._pop_mark()

    def op_pop_mark(self):
        self._pop_mark()

    def op_dup(self):
        self.stack.append(self.stack[-1])

    def op_none(self):
        self.stack.append(None)

    def op_true(self):
        self.stack.append(True)

    def op_false(self):
        self.stack.append(False)

    def op_binint(self):
        self.stack.append(struct.unpack("<i", self._read(4))[0])

    def op_binint1(self):
        self.stack.append(self._read(1)[0])

    def op_binint2(self):
        self.stack.append(struct.unpack("<H", self._read(2))[0])

    def op_long1(self):
        n = self._read(1)[0]
        self.stack.append(int.from_bytes(self._read(n), "little", signed=True))

    def op_long4(self):
        n = struct.unpack("<i", self._read(4))[0]
        self.stack.append(int.from_bytes(self._read(n), "little", signed=True))

    def op_binfloat(self):
        self.stack.append(struct.unpack(">d", self._read(8))[0])

    def _unicode(self, n):
        self.stack.append(str(self._read(n), "utf-8", "surrogatepass"))

    def op_binunicode(self):
        self._unicode(struct.unpack("<I", self._read(4))[0])

    def op_short_binunicode(self):
        self._unicode(self._read(1)[0])

    def op_binunicode8(self):
        self._unicode(struct.unpack("<Q", self._read(8))[0])

    def op_short_binstring(self):   # Python 2 str: decoded as in torch.load's default (utf-8)
        self.stack.append(str(self._read(self._read(1)[0]), "utf-8"))

    def op_binstring(self):
        self.stack.append(str(self._read(struct.unpack("<i", self._read(4))[0]), "utf-8"))

    def op_short_binbytes(self):
        self.stack.append(bytes(self._read(self._read(1)[0])))

    def op_binbytes(self):
        self.stack.append(bytes(self._read(struct.unpack("<I", self._read(4))[0])))

    def op_binbytes8(self):
        self.stack.append(bytes(self._read(struct.unpack("<Q", self._read(8))[0])))

    def op_empty_tuple(self):
        self.stack.append(())

    def op_tuple(self):
        items = self._pop_mark()
        self.stack.append(tuple(items))

    def op_tuple1(self):
        self.stack[-1] = (self.stack[-1],)

    def op_tuple2(self):
        self.stack[-2:] = [tuple(self.stack[-2:])]

    def op_tuple3(self):
        self.stack[-3:] = [tuple(self.stack[-3:])]

    def op_empty_list(self):
        self.stack.append([])

    def op_empty_dict(self):
        self.stack.append({})

    def op_empty_set(self):
        self.stack.append(set())

    def op_frozenset(self):
        items = self._pop_mark()
        self.stack.append(frozenset(_hashable(items)))

    def _target(self, types, what):
        t = self.stack[-1]
        if type(t) not in types:
            raise pickle.UnpicklingError(f"pickle: {what} on a {type(t).__name__} is not allowed")
        return t

    def op_append(self):
        v = self.stack.pop()
        self._target((list,), "APPEND").append(v)

    def op_appends(self):
        items = self._pop_mark()
        self._target((list,), "APPENDS").extend(items)

    def op_additems(self):
        items = self._pop_mark()
        self._target((set,), "ADDITEMS").update(_hashable(items))

    def op_setitem(self):
        v = self.stack.pop()
        k = self.stack.pop()
        self._target((dict, collections.OrderedDict, collections.Counter), "SETITEM")[_hashable1(k)] = v

    def op_setitems(self):
        items = self._pop_mark()
        if len(items) % 2:
            raise pickle.UnpicklingError("pickle: odd number of items in SETITEMS")
        d = self._target((dict, collections.OrderedDict, collections.Counter), "SETITEMS")
        for i in range(0, len(items), 2):
            d[_hashable1(items[i])] = items[i + 1]

    def op_global(self):
        module = self._line()
        name = self._line()
        self.stack.append(self._find(module, name))

    def op_stack_global(self):
        name = self.stack.pop()
        module = self.stack.pop()
        if type(module) is not str or type(name) is not str:
            raise pickle.UnpicklingError("pickle: STACK_GLOBAL needs two strings")
        self.stack.append(self._find(module, name))

    def _is_user(self, obj):
        return _allowlist.is_user_allowed(obj, self.user)

    def op_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if type(args) is not tuple or not (isinstance(func, _Callable) or self._is_user(func)):
            raise pickle.UnpicklingError(f"pickle: REDUCE of {func!r} is not allowed (only allowlisted functions "
                                         "and classes may be called; see cltorch.serialization.add_safe_globals)")
        self.stack[-1] = func(*args)

    def op_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if type(args) is not tuple:
            raise pickle.UnpicklingError("pickle: NEWOBJ needs a tuple of arguments")
        if isinstance(cls, _Callable) and cls.newobj:
            self.stack.append(cls(*args))
        elif isinstance(cls, type) and self._is_user(cls):
            self.stack.append(cls.__new__(cls, *args))
        else:
            raise pickle.UnpicklingError(f"pickle: NEWOBJ of {cls!r} is not allowed (only classes allowlisted with "
                                         "cltorch.serialization.add_safe_globals)")

    def op_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is collections.OrderedDict:
            if type(state) is not dict or not all(type(k) is str for k in state):
                raise pickle.UnpicklingError("pickle: malformed OrderedDict attributes")
            inst.__dict__.update(state)
        elif self._is_user(type(inst)):
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
            else:           # what pickle's BUILD does without __setstate__
                slots = None
                if isinstance(state, tuple) and len(state) == 2:
                    state, slots = state
                if state:
                    inst.__dict__.update(state)
                for k, v in (slots or {}).items():
                    setattr(inst, k, v)
        else:
            raise pickle.UnpicklingError(f"pickle: BUILD on a {type(inst).__name__} is not allowed (only an "
                                         "OrderedDict's attributes, such as a state dict's _metadata, and "
                                         "instances of classes allowlisted with cltorch.serialization."
                                         "add_safe_globals)")

    def op_binpersid(self):
        pid = self.stack.pop()
        if type(pid) is not tuple or not pid or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"pickle: only storages may be persistent ids, got {pid!r:.100}")
        self.stack.append(self.persistent_load(pid))

    def op_binget(self):
        self._memo_get(self._read(1)[0])

    def op_long_binget(self):
        self._memo_get(struct.unpack("<I", self._read(4))[0])

    def _memo_get(self, i):
        if i not in self.memo:
            raise pickle.UnpicklingError(f"pickle: memo key {i} not found")
        self.stack.append(self.memo[i])

    def op_binput(self):
        self.memo[self._read(1)[0]] = self.stack[-1]

    def op_long_binput(self):
        self.memo[struct.unpack("<I", self._read(4))[0]] = self.stack[-1]

    def op_memoize(self):
        self.memo[len(self.memo)] = self.stack[-1]


def _hashable1(k):
    try:
        hash(k)
    except TypeError:
        raise pickle.UnpicklingError(f"pickle: unhashable key of type {type(k).__name__}") from None
    return k


def _hashable(items):
    return [_hashable1(k) for k in items]


_OPS = {}
for _code, _name in [
        (b"\x80", "proto"), (b"\x95", "frame"), (b"(", "mark"), (b"0", "pop"), (b"1", "pop_mark"), (b"2", "dup"),
        (b"N", "none"), (b"\x88", "true"), (b"\x89", "false"), (b"J", "binint"), (b"K", "binint1"),
        (b"M", "binint2"), (b"\x8a", "long1"), (b"\x8b", "long4"), (b"G", "binfloat"), (b"X", "binunicode"),
        (b"\x8c", "short_binunicode"), (b"\x8d", "binunicode8"), (b"U", "short_binstring"), (b"T", "binstring"),
        (b"C", "short_binbytes"), (b"B", "binbytes"), (b"\x8e", "binbytes8"), (b")", "empty_tuple"),
        (b"t", "tuple"), (b"\x85", "tuple1"), (b"\x86", "tuple2"), (b"\x87", "tuple3"), (b"]", "empty_list"),
        (b"}", "empty_dict"), (b"\x8f", "empty_set"), (b"\x91", "frozenset"), (b"a", "append"),
        (b"e", "appends"), (b"\x90", "additems"), (b"s", "setitem"), (b"u", "setitems"), (b"c", "global"),
        (b"\x93", "stack_global"), (b"R", "reduce"), (b"\x81", "newobj"), (b"b", "build"),
        (b"Q", "binpersid"), (b"h", "binget"), (b"j", "long_binget"), (b"q", "binput"), (b"r", "long_binput"),
        (b"\x94", "memoize")]:
    _OPS[_code[0]] = getattr(_SafeUnpickler, "op_" + _name)


class _Callable:
    """An allowlisted callable: ``fn`` runs with the pickle's arguments (REDUCE, or NEWOBJ if ``newobj``)."""

    def __init__(self, name, fn, newobj=False):
        self.name, self.fn, self.newobj = name, fn, newobj

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name

