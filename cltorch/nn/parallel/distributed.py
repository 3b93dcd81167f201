"""``DistributedDataParallel`` on ``cltorch.distributed`` (MPI): PyTorch's data-parallel training wrapper.

Algorithm (PyTorch's reducer, re-derived):

- At construction, the module's parameters and buffers are broadcast from rank 0 (``init_sync``), so every
  rank starts from the same weights.
- Parameters that require grad are split into buckets in *reverse* registration order (the order in which
  backward produces their gradients): the first bucket holds up to 1 MiB, the others up to ``bucket_cap_mb``
  (25 MiB by default); a bucket holds one dtype on one device.
- A post-accumulate-grad hook on each parameter marks it ready. When all parameters of a bucket are ready, and
  every earlier bucket has been started (buckets start in bucket order on every rank), the bucket's gradients
  are flattened into one tensor and averaged across ranks with an async ``all_reduce(op=AVG)`` — while backward
  goes on computing the gradients of earlier layers. The hooks of later parameters drive MPI's progress. The
  hook that completes the last bucket waits for all of them and writes the averages back into ``.grad``.
  Averages are deterministic: every rank ends with bit-identical gradients (see cltorch.distributed).
- ``no_sync()``: forwards inside it record that their backward skips the reduction, so gradients accumulate
  locally; the first backward after it reduces the accumulated gradients.
- ``find_unused_parameters=True``: after forward, the autograd graph is walked from the outputs; parameters it
  does not reach are marked ready at once (contributing zeros); after the reduction, a parameter no rank used
  keeps its ``.grad`` untouched. Without it, a parameter that gets no gradient leaves its bucket unreduced and
  the next forward raises RuntimeError naming it (PyTorch's error).
- ``broadcast_buffers=True``: each training forward first broadcasts the buffers (BatchNorm statistics) of rank
  0.

``gradient_as_bucket_view`` and ``static_graph`` are memory/speed hints in PyTorch that do not change results;
they are accepted and do not change cltorch's algorithm. ``device_ids`` must be None or the one device of the
module; ``output_device`` moves the outputs there. Communication hooks (``register_comm_hook``), ``join`` and
mixed precision are not provided (NotImplementedError).
"""
import contextlib

from ..modules.module import Module
from ... import _device as _dev

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024


def _tensors_in(obj, out):
    from ..._tensor import Tensor
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors_in(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors_in(v, out)
    return out


def _reached_params(outputs):
    """ids of the leaf tensors the autograd graph of ``outputs`` reaches."""
    seen, reached = set(), set()
    stack = []
    for t in _tensors_in(outputs, []):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            reached.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            reached.add(id(var))
            continue
        for e in getattr(node, "edges", ()) or ():
            if e is not None and e[0] is not None:
                stack.append(e[0])
    return reached


class _Bucket:
    __slots__ = ("index", "params", "pending", "work", "flat", "started")

    def __init__(self, index, params):
        self.index = index
        self.params = params          # list of (param index, param)
        self.pending = len(params)
        self.work = None
        self.flat = None
        self.started = False


class DistributedDataParallel(Module):
    """Wraps ``module`` for data-parallel training over the ranks of ``process_group`` (the world by default).

    Args: as PyTorch's (``device_ids``, ``output_device``, ``dim``, ``broadcast_buffers``, ``init_sync``,
    ``process_group``, ``bucket_cap_mb``, ``find_unused_parameters``, ``check_reduction``,
    ``gradient_as_bucket_view``, ``static_graph``). Attributes: ``module``, ``process_group``, ``device``,
    ``require_backward_grad_sync``, ``bucket_bytes_cap``. ``state_dict`` keys carry the ``module.`` prefix.

    Raises RuntimeError when no process group is initialized, when the module's parameters span several devices,
    or, at forward, when the previous iteration's reduction did not finish (a parameter got no gradient and
    ``find_unused_parameters`` is False); ValueError for ``device_ids`` naming another device than the module's.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None):
        super().__init__()
        import cltorch.distributed as dist
        from cltorch.distributed._group import resolve
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel needs a process group: call "
                               "cltorch.distributed.init_process_group('mpi') first (and start the processes with "
                               "mpiexec -n N or python -m cltorch.distributed.run)")
        if mixed_precision is not None or device_mesh is not None or delay_all_reduce_named_params is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision, device_mesh and "
                                      "delay_all_reduce_named_params are not provided by cltorch")
        self.module = module
        pg = resolve(process_group)
        object.__setattr__(self, "process_group", pg)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        devices = {str(_dev.canonical(p.device)) for _, p in module.named_parameters()}
        devices |= {str(_dev.canonical(b.device)) for _, b in module.named_buffers()}
        if len(devices) > 1:
            raise RuntimeError(f"DistributedDataParallel: the module's parameters and buffers must be on one device, "
                               f"found {sorted(devices)}")
        self.device = _dev.device(next(iter(devices))) if devices else _dev.device("cpu")
        if device_ids is not None:
            ids = list(device_ids)
            if len(ids) != 1:
                raise ValueError(f"DistributedDataParallel: device_ids must hold one device (the module's, "
                                 f"{self.device}), got {ids}")
            d = ids[0]
            d = _dev.device("cl", d) if isinstance(d, int) and not isinstance(d, bool) else d
            if _dev.canonical(d) != _dev.canonical(self.device):
                raise ValueError(f"DistributedDataParallel: device_ids={ids} but the module is on {self.device}; "
                                 "move the module to its device first (module.to(device))")
        self.device_ids = None if device_ids is None else [self.device]
        self.output_device = None if output_device is None else _dev.canonical(
            _dev.device("cl", output_device) if isinstance(output_device, int) else output_device)
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._buckets = self._make_buckets()
        self._bucket_of = {}
        for b in self._buckets:
            for i, _ in b.params:
                self._bucket_of[i] = b
        self._ready = [False] * len(self._params)
        self._armed = False          # a forward prepared a reduction that backward has not finished
        self._started = False        # a hook of that backward ran
        self._next = 0
        self._locally_used = None
        self._handles = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(self._params)]
        if init_sync and pg.size() > 1:
            self._sync_states(list(module.parameters()) + list(module.buffers()))

    # ------------------------------------------------------------ construction helpers
    def _make_buckets(self):
        buckets, cur, cur_bytes, key = [], [], 0, None
        cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap)
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            k = (str(p.device), p.dtype)
            nb = p.numel() * p.element_size()
            if cur and (k != key or cur_bytes + nb > cap):
                buckets.append(_Bucket(len(buckets), cur))
                cur, cur_bytes = [], 0
                cap = self.bucket_bytes_cap
            cur.append((i, p))
            cur_bytes += nb
            key = k
        if cur:
            buckets.append(_Bucket(len(buckets), cur))
        return buckets

    def _sync_states(self, tensors):
        """Broadcast ``tensors`` from rank 0, coalesced by (device, dtype)."""
        import cltorch
        import cltorch.distributed as dist
        groups = {}
        for t in tensors:
            groups.setdefault((str(t.device), t.dtype), []).append(t)
        src = self.process_group.ranks[0]
        works = []
        with cltorch.no_grad():
            for ts in groups.values():
                flat = cltorch.cat([t.detach().reshape(-1) for t in ts])
                works.append((dist.broadcast(flat, src=src, group=self.process_group, async_op=True), flat, ts))
            for w, flat, ts in works:
                w.wait()
                off = 0
                for t in ts:
                    n = t.numel()
                    t.detach().copy_(flat[off:off + n].reshape(t.shape))
                    off += n

    # ------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        import cltorch
        if self._armed and self._started:
            missing = [self._names[i] for i, r in enumerate(self._ready) if not r]
            self._disarm()
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                "participate in calculating loss. Parameters which did not receive grad: " + ", ".join(missing))
        if self.module.training and self.broadcast_buffers and self.process_group.size() > 1:
            bufs = list(self.module.buffers())
            if bufs:
                self._sync_states(bufs)
        out = self.module(*inputs, **kwargs)
        if self.output_device is not None:
            from .data_parallel import _move
            out = _move(out, self.output_device)
        if cltorch.is_grad_enabled() and self.require_backward_grad_sync and self._params:
            self._arm(out)
        else:
            self._armed = False
        return out

    def _arm(self, out):
        self._armed = True
        self._started = False
        self._next = 0
        self._ready = [False] * len(self._params)
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = b.flat = None
            b.started = False
        self._locally_used = None
        if self.find_unused_parameters:
            reached = _reached_params(out)
            self._locally_used = [id(p) in reached for p in self._params]
            for i, used in enumerate(self._locally_used):
                if not used:
                    self._mark(i)

    def _disarm(self):
        self._armed = False
        self._started = False

    # ------------------------------------------------------------ backward
    def _hook(self, i):
        def hook(param):
            if not self._armed or self._ready[i]:
                return
            self._started = True
            if self._locally_used is not None:
                self._locally_used[i] = True
            self._mark(i)
        return hook

    def _mark(self, i):
        self._ready[i] = True
        b = self._bucket_of[i]
        b.pending -= 1
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            self._launch(self._buckets[self._next])
            self._next += 1
        for bb in self._buckets[:self._next]:         # drive MPI progress of the buckets in flight
            if bb.work is not None:
                bb.work.is_completed()
        if self._next == len(self._buckets) and self._started:
            self._finalize()

    def _launch(self, b):
        import cltorch
        import cltorch.distributed as dist
        with cltorch.no_grad():
            parts = []
            for _, p in b.params:
                g = p.grad
                parts.append(cltorch.zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None
                             else g.detach().reshape(-1))
            b.flat = cltorch.cat(parts) if len(parts) > 1 else parts[0].clone()
        b.work = dist.all_reduce(b.flat, op=dist.ReduceOp.AVG, group=self.process_group, async_op=True)
        b.started = True

    def _finalize(self):
        import cltorch
        import cltorch.distributed as dist
        used = None
        if self._locally_used is not None:
            flags = cltorch.tensor([1 if u else 0 for u in self._locally_used], dtype=cltorch.int32)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.process_group)
            used = flags.tolist()
        with cltorch.no_grad():
            for b in self._buckets:
                b.work.wait()
                off = 0
                for i, p in b.params:
                    n = p.numel()
                    if used is not None and not used[i]:
                        off += n
                        continue
                    v = b.flat[off:off + n].reshape(p.shape)
                    if p.grad is None:
                        p.grad = v.clone()
                    else:
                        p.grad.copy_(v)
                    off += n
                b.flat = b.work = None
        self._disarm()

    # ------------------------------------------------------------ PyTorch's other entry points
    @contextlib.contextmanager
    def no_sync(self):
        """Within it, backward passes accumulate gradients locally without communicating; the first backward of a
        forward outside it reduces the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("DistributedDataParallel.register_comm_hook is not provided by cltorch (buckets "
                                  "are always averaged with all_reduce)")

    def join(self, *args, **kwargs):
        raise NotImplementedError("DistributedDataParallel.join (uneven inputs) is not provided by cltorch: give "
                                  "every rank the same number of batches (DistributedSampler does)")

    def _get_bucket_sizes(self):
        """Bytes per bucket, in the order they are reduced (for tests and tuning)."""
        return [sum(p.numel() * p.element_size() for _, p in b.params) for b in self._buckets]
