"""Capture and replay of device work: the machinery of ``cltorch.compile`` and ``cltorch.cl.CLGraph``.

* ``trace``: a recorder the backend's runtime calls for every launch (``Runtime.capture``), and for pyopencl's
  copies and fills, while a capture is under way; host reads are noted as unreplayable.
* ``graph``: a trace made replayable: per-launch kernels with their arguments set once, enqueued in a loop.
* ``fusion``: chains of contiguous elementwise launches whose intermediates nothing else sees, as one kernel of
  the elementwise template.
* ``compile``: guards, the eager/capture/verify/replay stages, static inputs, gradients, optimizer steps.
* ``api``: ``compile`` (with ``OptimizedModule``), ``CLGraph`` and ``graph``.

Floors: ``trace``, ``graph`` and ``fusion`` use the backend and ``ops.elementwise``; ``compile`` and ``api`` stand
where ``cltorch.compile`` does, and reach Modules and Optimizers by their attributes (``cltorch.nn`` and
``cltorch.optim`` are imported lazily, for the OptimizedModule base class and the optimizer step hooks).
"""
from .trace import is_capturing  # noqa: F401

__all__ = ["is_capturing"]
