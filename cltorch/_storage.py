"""Storage: the flat, typed memory behind one or more tensors.

A ``cpu`` storage is a 1-D numpy array (host memory). Kernels reach it through a zero-copy
``CL_MEM_USE_HOST_PTR`` buffer on the host's OpenCL CPU device, made once and kept. A ``cl:N``
storage is a pooled device buffer. The version counter that in-place ops bump lives here, so every
view of a storage shares it (autograd checks it when a saved tensor is used).

Host reads of a cpu storage first wait for queued kernels (``host_sync``). A storage whose memory has
been handed to numpy (``from_numpy``, ``.numpy()``) is marked ``exposed``; handing it (or shared memory) to a
kernel (``cl_buffer``) makes the op finish before returning (``Runtime.finish_if_exposed``), so numpy never sees
stale data (DESIGN.md, decision 2).

A cpu storage can move into shared memory (``share_memory_``): its host array becomes a view of a
page-aligned ``MAP_SHARED`` mapping (``cltorch._shm.Segment``) that other processes map too, so kernels
(zero-copy, as before) and numpy in every process read and write the same bytes.
"""
import ctypes
import os
import sys

import numpy as np

from . import backend
from . import _shm
from .backend.forked import FORKED as _FORKED, hold as _hold

__all__ = ["Storage"]


_inference_probe = [lambda: False]   # set by _dispatch (a higher floor): is inference mode on


class Storage:
    __slots__ = ("device", "dtype", "size", "host", "buf", "_hostbuf", "version", "exposed", "_rt", "_nbytes",
                 "pinned", "shm", "_alias_of", "inference", "_block", "__weakref__")

    def __init__(self, device, dtype, size, host=None, buf=None, rt=None, nbytes=0):
        self.device = device
        self.dtype = dtype
        self.size = size          # elements
        self.host = host          # numpy 1-D array for cpu storages
        self.buf = buf            # pooled cl buffer for device storages
        self._hostbuf = None
        self.version = 0
        self.exposed = False
        self.pinned = False
        self._rt = rt
        self._nbytes = nbytes     # accounted device bytes
        self.shm = None           # the _shm.Segment a shared cpu storage lives in
        self._alias_of = None     # the storage whose memory this one reinterprets (``alias``), kept alive
        self.inference = _inference_probe[0]()   # allocated inside inference_mode (Tensor.is_inference)
        self._block = None        # the pooled host block of a cpu storage made by ``empty`` (see _take_block)

    # ------------------------------------------------------------ construction
    @classmethod
    def empty(cls, size, dtype, device, for_kernel=False):
        """``size`` uninitialised elements of ``dtype`` on ``device`` (a ``cltorch.device``).

        A cpu storage's memory is an aligned host block from the cpu block pool (``_take_block``, up to
        ``POOL_BLOCK_MAX`` bytes) that keeps its zero-copy OpenCL buffer, so an op's output on cpu costs what a pooled
        device buffer costs; larger ones are aligned numpy arrays of their own. ``for_kernel=True`` promises that a
        kernel writes the storage before anything reads or writes it on the host: it may then get a block that
        kernels still queued use (the in-order queue runs them first, as device buffers are reused), where any other
        caller gets one no queued kernel touches. Raises TypeError for a dtype the device lacks (fp64, complex128)
        and OutOfMemoryError from the device pool."""
        size = int(size)
        if device.type == "cpu":
            nb = size * dtype.itemsize
            if 0 < nb <= POOL_BLOCK_MAX:
                blk = _take_block(nb, for_kernel)
                host = blk[4]
                if blk[5] is not dtype or host.size != size:     # the block's last typed view does not fit
                    host = blk[4] = blk[0][:nb].view(dtype.np)
                    blk[5] = dtype
                st = cls(device, dtype, size, host)
                st._block = blk
                return st
            return cls(device, dtype, size, host=aligned_empty(size, dtype.np))
        rt = backend.runtime(device.index)
        nbytes = size * dtype.itemsize
        if dtype.itemsize != 4 and (dtype.is_floating_point or dtype.itemsize == 16):   # fp64 / fp16 extensions
            _check_caps(dtype, rt)
        # positional: every op's output passes here (keyword arguments cost a fifth of the construction)
        return cls(device, dtype, size, None, rt.alloc(nbytes), rt, nbytes or 1)

    @classmethod
    def from_host(cls, array, device):
        """A storage holding a copy of (or, for cpu, sharing) a 1-D contiguous numpy array."""
        from ._dtype import from_numpy_dtype
        dtype = from_numpy_dtype(array.dtype)
        if device.type == "cpu":
            return cls(device, dtype, array.size, host=array)
        st = cls.empty(array.size, dtype, device)
        if array.size:
            st._rt.copy(st.buf, np.ascontiguousarray(array), is_blocking=True)
        return st

    @classmethod
    def from_segment(cls, seg, dtype, size):
        """A cpu storage of ``size`` elements of ``dtype`` living in shared-memory segment ``seg`` (no copy)."""
        from ._device import device as Device
        host = np.frombuffer(seg.mm, dtype=np.uint8, count=size * dtype.itemsize).view(dtype.np)
        st = cls(Device("cpu"), dtype, size, host=host)
        st.shm = seg
        return st

    def alias(self, dtype):
        """A storage of ``dtype`` over this storage's memory (no copy): how ``view_as_real`` / ``view_as_complex``
        reinterpret complex64 as pairs of float32 and back. The byte size must divide evenly; the alias keeps this
        storage (and so its buffer) alive. A cpu storage is first moved to aligned memory, once, so that neither
        moves it afterwards."""
        nbytes = self.size * self.dtype.itemsize
        if nbytes % dtype.itemsize:
            raise RuntimeError(f"cannot view a {self.dtype} storage of {self.size} elements as {dtype}")
        if self.host is not None:
            if self._hostbuf is None:
                self.align_host()
            st = _Alias(self.device, dtype, nbytes // dtype.itemsize, host=self.host.view(dtype.np), rt=self._rt)
            st.exposed = self.exposed
        else:
            st = _Alias(self.device, dtype, nbytes // dtype.itemsize, buf=self.buf, rt=self._rt)
        st._alias_of = self
        return st

    # ------------------------------------------------------------ sharing between processes
    def is_shared(self):
        """True when this cpu storage lives in memory shared with other processes."""
        return self.shm is not None

    def share_memory_(self):
        """Moves a cpu storage into shared memory, in place (a no-op when it is there already); returns self.

        The values are copied once into a fresh segment (``cltorch._shm``: an anonymous ``memfd`` segment
        under the ``file_descriptor`` strategy, a named ``/dev/shm`` one under ``file_system``), which then
        is the storage's memory: every tensor viewing the storage sees it. numpy arrays taken earlier
        (``from_numpy``, ``.numpy()``) keep the old memory, as in PyTorch.

        Raises:
            RuntimeError: for a device (``cl:N``) storage: OpenCL has no way to share device memory
                between processes (PyTorch's CUDA IPC has no OpenCL counterpart).
        """
        if self.shm is not None:
            return self
        if self.host is None:
            raise RuntimeError(
                f"share_memory_(): cannot share OpenCL device memory ({self.device}) between processes: OpenCL "
                "has no inter-process memory handles. Keep tensors that processes share on the cpu "
                "(t.cpu().share_memory_()) and move them to the device inside each process.")
        self.host_sync()
        nbytes = self.size * self.dtype.itemsize
        seg = _shm.new_shared_segment(nbytes)
        host = np.frombuffer(seg.mm, dtype=np.uint8, count=nbytes).view(self.dtype.np)
        host[...] = self.host
        self.host = host
        if _FORKED[0]:            # the old memory's buffers are the parent's: never released here
            _hold(self._hostbuf, self._block)
        self._hostbuf = None      # the zero-copy buffer over the old memory; a new one is made when needed
        self._block = None        # the old memory no longer backs this storage (numpy may still hold it)
        self.pinned = False
        self.exposed = False
        self.shm = seg
        return self

    def __del__(self):
        if self._nbytes and self._rt is not None:
            self._rt.release(self._nbytes)
        if _FORKED[0]:      # a forked child never releases an OpenCL object the parent made (backend/forked.py)
            _hold(self.buf, self._hostbuf)
            blk = self._block
            if blk is not None and blk[1] is not None:    # a block with the parent's buffer: never reused here
                _hold(blk)
                self._block = None
        blk = self._block
        if blk is not None and not self.exposed:
            try:
                _give_block(blk, self.host)
            except Exception:    # interpreter shutdown: module globals may be gone
                pass

    # ------------------------------------------------------------ access
    @property
    def is_host(self):
        return self.host is not None

    def runtime(self):
        """The Runtime whose queue runs kernels on this storage."""
        if self._rt is None:
            self._rt = backend.cpu_runtime()
        return self._rt

    def cl_buffer(self):
        """The cl.Buffer kernels use: the device buffer, or a zero-copy buffer over the host memory. For a cpu storage
        it also holds the memory until the queue next syncs (``Runtime.keep``: the pooled block, else the storage)
        and notes memory numpy or another process shares (``Runtime.touch_exposed``), so fetch it per enqueue."""
        if self.buf is not None:
            return self.buf
        blk = self._block
        if blk is not None:       # a pooled block: its buffer covers the whole block and stays with it
            rt = blk[2]
            if rt is None:
                rt = self.runtime()
                blk[1] = rt.host_buffer(blk[0])
                blk[2] = rt
            self._rt = rt
            rt.keep(blk)
            if self.exposed:
                rt.touch_exposed()
            return blk[1]
        hb = self._hostbuf
        if hb is None:
            self.align_host()
            hb = self._hostbuf = self.runtime().host_buffer(self.host)
        # host memory must outlive the kernels queued on it: the runtime holds the storage until it syncs
        rt = self.runtime()
        rt.keep(self)
        if self.exposed or self.shm is not None:   # numpy or another process shares it: the op finishes
            rt.touch_exposed()
        return hb

    def align_host(self):
        """Move a cpu storage's memory to a 128-byte boundary, once, before a kernel first uses it: zero-copy
        buffers want aligned host memory (PoCL asks for 128 bytes; other drivers copy otherwise) and vector loads
        need it. Only memory numpy has not seen moves; memory it shares (``exposed``) is used where it is."""
        if self._hostbuf is None and not self.exposed and host_address(self.host) % HOST_ALIGN:
            aligned = aligned_empty(self.size, self.dtype.np)
            aligned[...] = self.host
            self.host = aligned

    def host_sync(self):
        """Wait for queued kernels that may touch this host storage."""
        rt = self._rt
        if rt is not None and rt.pending and not backend.in_forked_child():
            rt.synchronize()

    def read(self, offset, count):
        """``count`` elements from ``offset`` as a new numpy array (waits for the queue)."""
        if self.host is not None:
            self.host_sync()
            return self.host[offset:offset + count].copy()
        out = np.empty(count, dtype=self.dtype.np)
        if count:
            rt = self._rt
            with rt.lock:       # no launch from another thread between the blocking copy and clearing the flag
                rt.copy(out, self.buf, src_offset=offset * self.dtype.itemsize, is_blocking=True)
                rt.pending = False
            if rt._checks:      # the in-order queue has finished everything before this read
                rt.run_checks()
        return out

    def write(self, array, offset=0):
        """Copy a contiguous numpy array into this storage at ``offset`` (elements)."""
        array = np.ascontiguousarray(array, dtype=self.dtype.np)
        if self.host is not None:
            self.host_sync()
            self.host[offset:offset + array.size] = array.reshape(-1)
            return
        if array.size:
            self._rt.copy(self.buf, array, dst_offset=offset * self.dtype.itemsize, is_blocking=True)


class _Alias(Storage):
    """A storage reinterpreting another's memory (``Storage.alias``); it shares that storage's version counter, so
    an in-place write through ``z.real`` is seen by autograd's checks on z."""

    __slots__ = ()

    @property
    def version(self):
        return self._alias_of.version

    @version.setter
    def version(self, v):
        try:
            base = self._alias_of
        except AttributeError:      # Storage.__init__ sets version before _alias_of
            return
        if base is not None:
            base.version = v


_addressof, _c_char = ctypes.addressof, ctypes.c_char
HOST_ALIGN = 128   # bytes: vector loads in kernels (float8 and wider) need their natural alignment
POOL_BLOCK_MAX = 16 << 20   # bytes: cpu storages up to this size live in pooled blocks (Storage.empty)
POOL_HELD_MAX = 64 << 20    # bytes of free blocks the pool keeps for reuse; blocks past it are freed


# ------------------------------------------------------------------ the cpu block pool
# A block is [aligned uint8 array, its zero-copy cl.Buffer, the Runtime of that buffer, the Runtime.syncs count at
# which it was freed with kernels queued, else -1, the typed view last handed out as a storage's host array, its
# cltorch dtype, the Runtime.tail event when it was freed with kernels queued] (no buffer and runtime until its
# first kernel). Storage.empty takes one; a dying
# storage gives it back only when nothing else can reach its memory: not exposed to numpy, and no view, memoryview or
# buffer of it alive (reference counts: numpy views of a view hold the owning array, so the owner's count sees every
# numpy view; a memoryview or ctypes object holds the array it was made from, the storage's own view). The runtime
# holds a block a queued kernel uses until the queue finished (Runtime.keep), so its memory outlives the kernel even
# if the pool drops it; a block still queued is handed only to a kernel's output (Storage.empty(for_kernel=True)),
# which the in-order queue writes after those kernels, and never to memory the host may write first, until a
# synchronize or the completion of the queue's last command at the time it was freed (its tail event: in an in-order
# queue, every command before it is done then) shows those kernels finished. Without that second test, a cpu step
# that makes no synchronize (no host read) would take a fresh block for every output not marked for_kernel.
# Keyed by the block's size (the request rounded up to HOST_ALIGN bytes).
_free_blocks = {}
_held = [0]


def _take_block(nbytes, for_kernel):
    """A free block of at least ``nbytes`` (> 0) bytes, or a new one (its buffer made at its first kernel). A kernel's
    output takes the block freed last; any other storage the one freed first, if no kernel queued since its last
    use can still touch it (see above)."""
    key = -(-nbytes // HOST_ALIGN) * HOST_ALIGN
    lst = _free_blocks.get(key)
    if lst:
        try:
            if for_kernel:
                blk = lst.pop()
            else:
                blk = lst[0]
                rt = blk[2]
                if rt is not None and blk[3] >= rt.syncs and not rt.tail_done(blk[6]):
                    blk = None     # maybe still queued: memory the host may write first takes a new block
                else:
                    got = lst.pop(0)
                    if got is not blk:      # another thread took it meanwhile: put back what came instead
                        lst.append(got)
                        blk = None
        except IndexError:         # another thread took the last one
            blk = None
        if blk is not None:
            _held[0] -= key
            return blk
    return [aligned_empty(key, np.uint8), None, None, -1, None, None, None]


# sys.getrefcount inside _give_block of a block nothing else reaches: the owner is held by the block's array, the
# storage's host view, the local name and getrefcount's argument; the storage's host array by the dying storage,
# the block (its cached view), this function's parameter and getrefcount's argument. Checked by
# tests/test_storage_pool.py.
_OWNER_REFS, _HOST_REFS = 4, 4
_refs = sys.getrefcount


def _give_block(blk, host):
    owner = blk[0].base
    if _refs(host) != _HOST_REFS or _refs(owner) != _OWNER_REFS or host.base is not owner:
        return                 # something else reaches the memory: numpy frees it with the last reference
    key = blk[0].nbytes
    held = _held[0] + key
    if held > POOL_HELD_MAX:
        return
    rt = blk[2]
    # kernels queued before now may use it until the next synchronize ends (pending is set before an enqueue and
    # cleared after the finish, both under the runtime's lock, so a clear flag means they are done)
    if rt is not None and rt._pending:
        blk[3], blk[6] = rt.syncs, rt.tail
    else:
        blk[3] = -1
        blk[6] = None
    _held[0] = held
    lst = _free_blocks.get(key)
    if lst is None:
        lst = _free_blocks[key] = []
    lst.append(blk)


def release_host_blocks():
    """Free the cpu block pool's free blocks (their memory and zero-copy buffers); returns the bytes freed."""
    n = _held[0]
    _free_blocks.clear()
    _held[0] = 0
    return n


def _forget_pool_in_child():
    # the inherited free blocks are never used nor freed in a forked child: their buffers are the parent's
    _hold(dict(_free_blocks))
    _free_blocks.clear()
    _held[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def host_address(array):
    """The address of a numpy array's first byte (``array.ctypes.data``, which costs 4x as much as reading it
    through a ctypes view of a writable array)."""
    try:
        return _addressof(_c_char.from_buffer(array))
    except (TypeError, ValueError):     # read-only or empty
        return array.ctypes.data


def aligned_empty(n, npdtype, align=HOST_ALIGN):
    """An uninitialised 1-D numpy array of ``n`` elements whose data starts on an ``align``-byte boundary."""
    npdtype = np.dtype(npdtype)
    raw = np.empty(n * npdtype.itemsize + align, dtype=np.uint8)
    start = (-host_address(raw)) % align
    return raw[start:start + n * npdtype.itemsize].view(npdtype)


def _check_caps(dtype, rt):
    from ._dtype import float64, complex128
    if dtype is complex128 and not rt.info.fp64:
        raise TypeError(f"complex128 is not supported on {rt.info.name} (cl:{rt.index}): the device lacks the "
                        f"cl_khr_fp64 extension its double2 storage needs")
    if dtype is float64 and not rt.info.fp64:
        raise TypeError(f"float64 is not supported on {rt.info.name} (cl:{rt.index}): the device lacks the "
                        f"cl_khr_fp64 extension")
    # float16 needs no extension: it is a storage dtype (vload_half / vstore_half) computed in float where the
    # device lacks cl_khr_fp16


def check_caps(dtype, device):
    """Raise TypeError naming the device when ``dtype`` needs an extension the device lacks."""
    if dtype.itemsize == 8 and dtype.is_floating_point or dtype.name in ("float16", "complex128"):
        if device.type == "cpu":
            if backend.cpu_device_present():     # else host memory only: it holds every dtype
                _check_caps(dtype, backend.cpu_runtime())
        else:
            _check_caps(dtype, backend.runtime(device.index))
