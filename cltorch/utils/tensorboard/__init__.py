"""``cltorch.utils.tensorboard``: ``SummaryWriter``, writing TensorBoard event files through the ``tensorboard``
package (``pip install tensorboard``), as ``torch.utils.tensorboard`` does.

Raises ImportError at import when ``tensorboard`` is not installed.
"""
try:
    import tensorboard  # noqa: F401
    from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("TensorBoard logging requires TensorBoard. Install it with: pip install tensorboard") from e

from .writer import SummaryWriter, FileWriter  # noqa: E402,F401

__all__ = ["SummaryWriter", "FileWriter"]
