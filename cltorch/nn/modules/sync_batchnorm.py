"""``SyncBatchNorm``: batch normalisation whose batch statistics span every rank of a process group.

Outside a multi-rank job (``cltorch.distributed`` not initialised, a world of one, eval mode, or running stats
used) it is exactly :class:`BatchNorm*d` (the same ``F.batch_norm`` call). In training with more than one rank,
the per-channel mean and the biased variance are reduced across the group with two ``all_reduce`` calls (sum and
count, then the centred sum of squares: the two-pass form, no ``E[x^2] - E[x]^2`` cancellation) and the
normalisation is composed from tensor ops. Gradients flow through a differentiable all-reduce (its backward
all-reduces the incoming gradient), which is the exact gradient of the global statistics. The running statistics
take the global mean and the unbiased global variance, as PyTorch's. Unlike PyTorch, cpu inputs may be
synchronised too (cltorch's collectives run on every device).
"""
import cltorch as torch
from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


def _dist():
    import cltorch.distributed as dist
    return dist


def _all_reduce_fn():
    from ...autograd import Function

    class _AllReduceSum(Function):
        @staticmethod
        def forward(ctx, t, group):
            ctx.group = group
            out = t.clone()
            _dist().all_reduce(out, group=group)
            return out

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            _dist().all_reduce(g, group=ctx.group)
            return g, None

    return _AllReduceSum


_ALL_REDUCE = []


def _all_reduce_sum(t, group):
    """Differentiable SUM all-reduce (out of place)."""
    if not _ALL_REDUCE:
        _ALL_REDUCE.append(_all_reduce_fn())
    return _ALL_REDUCE[0].apply(t, group)


def _sync_batch_norm(x, weight, bias, running_mean, running_var, eps, momentum, group):
    C = x.shape[1]
    dims = [0] + list(range(2, x.dim()))
    shape = (1, C) + (1,) * (x.dim() - 2)
    count = x.numel() // C
    local = torch.cat([x.sum(dims), torch.full((1,), float(count), dtype=x.dtype, device=x.device)])
    total = _all_reduce_sum(local, group)
    n = total[C:].detach()
    n_host = float(n.item())
    if n_host <= 1 and running_var is not None:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(x.shape)}")
    mean = total[:C] / n_host
    xc = x - mean.reshape(shape)
    var = _all_reduce_sum((xc * xc).sum(dims), group) / n_host
    y = xc * (var + eps).rsqrt().reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    if running_mean is not None:
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype), alpha=momentum)
            unbiased = var.detach() * (n_host / max(n_host - 1, 1.0))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return y


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over (N, C, *) (at least 2-D) with statistics shared by the ranks of
    ``process_group`` (default: the whole world) in training. Arguments, buffers, state-dict keys and
    initialisation are BatchNorm's (plus ``process_group``).

    Raises ValueError for input of fewer than 2 dims or with 0 channels, and RuntimeError when a
    ``process_group`` is given but ``cltorch.distributed`` is not initialised (in training).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _check_non_zero_input_channels(self, input):  # noqa: A002
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def _sync_group(self):
        """The group to synchronise over, or None when this forward is a plain batch norm."""
        dist = _dist()
        if not (dist.is_available() and dist.is_initialized()):
            if self.process_group is not None:
                raise RuntimeError("SyncBatchNorm was given a process_group but cltorch.distributed is not "
                                   "initialized: call cltorch.distributed.init_process_group() first (or pass "
                                   "process_group=None to run as BatchNorm in one process)")
            return None
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        return group if dist.get_world_size(group) > 1 else None

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        self._check_non_zero_input_channels(input)
        group = self._sync_group() if self.training else None
        if group is None:
            return super().forward(input)
        eaf = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                eaf = 1.0 / float(self.num_batches_tracked.item())
        rm = self.running_mean if self.track_running_stats else None
        rv = self.running_var if self.track_running_stats else None
        return _sync_batch_norm(input, self.weight, self.bias, rm, rv, self.eps, eaf, group)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Replace every batch norm (``BatchNorm1d/2d/3d``, ``SyncBatchNorm``) in ``module`` (recursively) by a
        SyncBatchNorm sharing its parameters and buffers (the same tensors) and training flag. Returns the module,
        or the new layer when ``module`` itself is a batch norm."""
        out = module
        if isinstance(module, _BatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group)
            if module.affine:
                with torch.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out

