"""Tensor memory as host buffers for MPI.

- cpu tensors: a contiguous one is sent from, and received into, its storage's own numpy array (no copy); a
  strided one goes through a contiguous copy (and ``copy_`` back).
- device tensors: device -> page-locked staging buffer (``CL_MEM_ALLOC_HOST_PTR``, pooled per device) -> MPI ->
  staging -> device. The copies are OpenCL commands enqueued without blocking, in chunks, so that the collective
  can start on the first chunk while later ones are still copying (see all_reduce in _collectives.py).
"""
import numpy as np

__all__ = ["Host", "release_all"]

_pools = {}          # runtime id -> list of [nbytes, buf, arr, busy]


def _acquire(rt, nbytes):
    pool = _pools.setdefault(id(rt), [])
    best = None
    for e in pool:
        if not e[3] and e[0] >= nbytes and (best is None or e[0] < best[0]):
            best = e
    if best is None:
        size = 1 << max(12, int(nbytes - 1).bit_length())
        buf, arr = rt.pinned_buffer(size)
        best = [size, buf, arr, False]
        pool.append(best)
    best[3] = True
    return best


def release_all(entries):
    for e in entries:
        e[3] = False


class Host:
    """The host side of one tensor in one collective.

    ``arr``: a 1-D contiguous numpy array of the tensor's elements (dtype ``t.dtype.np``). For an input,
    ``load(lo, hi)`` returns the OpenCL events after which elements [lo, hi) are valid in ``arr`` (none for cpu).
    For an output, ``store(lo, hi)`` writes [lo, hi) of ``arr`` back to the tensor and returns the events to wait
    for; ``finish()`` returns the staging buffer to the pool and, for a strided cpu tensor, copies back.
    """

    def __init__(self, t, write=False, read=True):
        self.t = t
        st = t._storage
        self.n = t.numel()
        self.npd = np.dtype(t.dtype.np)
        self.isz = self.npd.itemsize
        self.entry = None
        self.write = write
        self.device = st.host is None
        self._src = t
        if not self.device:
            st.host_sync()
            if t.is_contiguous():
                self.arr = st.host[t._offset:t._offset + self.n]
                self.direct = True
            else:
                self.arr = np.ascontiguousarray(t._host_view()).reshape(-1) if read else np.empty(self.n, self.npd)
                self.direct = False
            return
        self.direct = t.is_contiguous()
        if not self.direct:
            self._src = t.contiguous()
        self.rt = st.runtime()
        self.entry = _acquire(self.rt, max(self.n * self.isz, 1))
        self.arr = self.entry[2][:self.n * self.isz].view(self.npd)

    def load(self, lo=0, hi=None):
        if not self.device:
            return []
        hi = self.n if hi is None else hi
        if hi <= lo:
            return []
        s = self._src
        with self.rt.lock:
            ev = self.rt.copy(self.arr[lo:hi], s._storage.buf, src_offset=(s._offset + lo) * self.isz,
                              is_blocking=False)
        return [ev]

    def store(self, lo=0, hi=None):
        hi = self.n if hi is None else hi
        if not self.device or hi <= lo:
            return []
        t = self.t if self.direct else self._src
        with self.rt.lock:
            ev = self.rt.copy(t._storage.buf, self.arr[lo:hi], dst_offset=(t._offset + lo) * self.isz,
                              is_blocking=False)
        return [ev]

    def finish(self):
        """After the last store's events completed: copy back a strided tensor, bump the version, free staging."""
        if self.write:
            if not self.direct:
                if self.device:
                    self.t.copy_(self._src)
                else:
                    import cltorch
                    self.t.copy_(cltorch.from_numpy(self.arr.reshape(self.t.shape)))
            self.t._storage.version += 1
        if self.entry is not None:
            self.entry[3] = False
            self.entry = None
