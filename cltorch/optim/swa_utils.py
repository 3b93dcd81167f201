"""Stochastic weight averaging and EMA of a model's weights (``torch.optim.swa_utils``).

:class:`AveragedModel` keeps a copy of a model whose parameters (and optionally buffers) are a running
average of the model's: the equal-weight average of SWA (Izmailov et al., 2018, "Averaging Weights Leads to
Wider Optima and Better Generalization") or an exponential moving average. :class:`SWALR` anneals each
group's learning rate to a constant SWA rate; :func:`update_bn` recomputes BatchNorm running statistics with
one pass over data.
"""
import itertools
import math
import warnings
from copy import deepcopy

import cltorch as torch

from ..nn import Module
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _count(n):
    """The number already averaged as a Python number (``n`` may be a 0-d Tensor)."""
    return n.item() if hasattr(n, "item") else n


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA over lists: ``ema = decay * ema + (1 - decay) * model`` (``lerp`` for floating tensors).
    ValueError unless ``0 <= decay <= 1``."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with torch.no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                if p_ema.dtype.is_floating_point:
                    p_ema.lerp_(p_model, 1 - decay)
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In-place equal-weight average over lists: ``avg += (model - avg) / (n + 1)`` (``lerp`` with weight
    ``1 / (n + 1)`` for floating tensors; an integer tensor gets the quotient truncated back to its dtype)."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = _count(num_averaged)
        with torch.no_grad():
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                if p_avg.dtype.is_floating_point:
                    p_avg.lerp_(p_model, 1.0 / (n + 1))
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``avg_fn(ema, model, n) -> decay * ema + (1 - decay) * model``. ValueError unless ``0 <= decay <= 1``."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with torch.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``avg_fn(avg, model, n) -> avg + (model - avg) / (n + 1)``."""

    def swa_update(averaged_param, current_param, num_averaged):
        with torch.no_grad():
            return averaged_param + (current_param - averaged_param) / (_count(num_averaged) + 1)

    return swa_update


class AveragedModel(Module):
    r"""A deep copy of ``model`` whose parameters are a running average of ``model``'s.

    Args:
        model (Module): the model to average (deep-copied; the copy is ``self.module``).
        device (optional): where the copy lives (``self.module.to(device)``).
        avg_fn: ``avg_fn(averaged, current, num_averaged) -> Tensor``, applied per tensor.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, num_averaged)``, in place, called once per
            (device, dtype) group. Default (neither): the equal-weight SWA average. Giving both raises
            AssertionError, as PyTorch.
        use_buffers (bool): average the buffers too (default False: buffers are copied from ``model``).

    ``update_parameters(model)``: the first call copies ``model``'s values; later calls average them in.
    ``n_averaged`` (a long 0-d buffer) counts the calls. ``forward`` calls ``self.module``.
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", torch.tensor(0, dtype=torch.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average ``model``'s parameters (and buffers, with ``use_buffers``) into this copy."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine = list(self.parameters())
            theirs = list(model.parameters())
        n = int(self.n_averaged.item())
        with torch.no_grad():
            pairs = [(a.detach(), b.detach().to(a.device)) for a, b in zip(mine, theirs)]
            if n == 0:
                for a, b in pairs:
                    a.copy_(b)
            elif self.avg_fn is not None:
                for a, b in pairs:
                    a.copy_(self.avg_fn(a, b, self.n_averaged.to(a.device)))
            else:
                fn = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
                groups = {}
                for a, b in pairs:
                    groups.setdefault((str(a.device), a.dtype), []).append((a, b))
                for group in groups.values():
                    fn([a for a, _ in group], [b for _, b in group], self.n_averaged.to(group[0][0].device))
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Recompute the running statistics of every BatchNorm in ``model`` with one pass over ``loader``.

    Each BatchNorm's statistics are reset and accumulated as a cumulative average (``momentum=None`` for the
    pass; each layer's momentum and the model's train/eval mode are restored after). Each batch is a Tensor
    or a list/tuple whose first element is the input; ``device`` moves it there first. A model without
    BatchNorm is left untouched. Runs without gradients.
    """
    from ..nn.modules.normalization import _BatchNorm
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with torch.no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    r"""Anneals each group's learning rate to ``swa_lr`` over ``anneal_epochs`` epochs, then holds it.

    At scheduler step ``k`` (``k = 0`` at construction) with ``t = clamp(k / max(1, anneal_epochs), 0, 1)``
    and ``a = (1 - cos(pi t)) / 2`` (``"cos"``) or ``a = t`` (``"linear"``), the rate is
    ``swa_lr * a + lr0 * (1 - a)``, where ``lr0`` is recovered from the group's current rate and the previous
    step's ``a`` (PyTorch's chainable form, so the schedule starts from whatever rate the group has).

    Args:
        optimizer; swa_lr (float, or a list with one per group; stored as ``group["swa_lr"]``);
        anneal_epochs (int >= 0, default 10); anneal_strategy (``"cos"`` or ``"linear"``); last_epoch (-1).
        ValueError for another strategy or a negative/non-int ``anneal_epochs``.
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self):
        """Every attribute except the optimizer and the anneal function."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
