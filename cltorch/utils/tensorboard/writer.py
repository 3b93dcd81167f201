"""``SummaryWriter``: PyTorch's TensorBoard writer API over the ``tensorboard`` package's ``EventFileWriter``.

Provided: ``add_scalar``, ``add_scalars``, ``add_histogram`` (and ``_raw``), ``add_text``, ``add_hparams``, ``flush``, ``close``,
``get_logdir`` and use as a context manager. The image, audio, video, figure, graph, embedding, mesh and PR-curve
methods raise NotImplementedError naming themselves.
"""
import os
import socket
import time
from datetime import datetime

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import summary as S

__all__ = ["SummaryWriter", "FileWriter"]


class FileWriter:
    """Writes Event protos to one event file in ``log_dir`` (asynchronously, through ``EventFileWriter``)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(Event(summary=summary), global_step, walltime)

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()

    def reopen(self):
        self.event_writer.reopen()


def _not_provided(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"SummaryWriter.{name} is not provided by cltorch (provided: add_scalar, "
                                  "add_scalars, add_histogram, add_text, add_hparams)")
    method.__name__ = name
    method.__doc__ = f"Raises NotImplementedError: ``{name}`` is not provided."
    return method


class SummaryWriter:
    """Writes TensorBoard event files under ``log_dir`` (default ``runs/<date>_<host><comment>``), as
    ``torch.utils.tensorboard.SummaryWriter``.

    ``purge_step``: events at or after this step, left by an earlier run that crashed, are hidden by TensorBoard
    (a ``SessionLog.START`` is written at that step). ``max_queue`` and ``flush_secs`` set how often pending events
    reach the disk; ``flush()`` and ``close()`` write them now. Values may be cltorch tensors (any device), numpy
    values or Python numbers.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120, filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = None
        self.all_writers = {}
        self._get_file_writer()

    def _get_file_writer(self):
        if self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step, self.purge_step = self.purge_step, None
                self.file_writer.add_event(Event(session_log=SessionLog(status=SessionLog.START)), step)
        return self.file_writer

    def get_logdir(self):
        """The directory event files are written to."""
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Logs one scalar (a number or a one-element tensor/array; ValueError otherwise) under ``tag``."""
        self._get_file_writer().add_summary(S.scalar(tag, scalar_value, new_style, double_precision), global_step,
                                            walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Logs several scalars on one chart: each ``tag`` goes to its own run ``<log_dir>/<main_tag>_<tag>`` under
        the tag ``main_tag``, as PyTorch lays them out."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(base, main_tag.replace("/", "_") + "_" + tag)
            w = self.all_writers.get(path)
            if w is None:
                w = self.all_writers[path] = FileWriter(path, self.max_queue, self.flush_secs, self.filename_suffix)
            w.add_summary(S.scalar(main_tag, value), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """Logs a histogram of ``values`` (see ``summary.histogram`` for ``bins``)."""
        self._get_file_writer().add_summary(S.histogram(tag, values, bins, max_bins), global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,  # noqa: A002
                          global_step=None, walltime=None):
        """Logs a histogram given as its statistics and buckets (``bucket_limits`` are right edges, one per count).
        Raises ValueError when the two lists differ in length."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        proto = S.HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                                 bucket_limit=list(bucket_limits), bucket=list(bucket_counts))
        self._get_file_writer().add_summary(S.Summary(value=[S.Summary.Value(tag=tag, histo=proto)]), global_step,
                                            walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Logs a string (markdown in TensorBoard's text tab) under ``tag + "/text_summary"``."""
        self._get_file_writer().add_summary(S.text(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """Logs one hyperparameter run: the hparams plugin's summaries and each metric as a scalar, in the sub-run
        ``<log_dir>/<run_name>`` (default: the current time), as PyTorch does."""
        exp, start, end = S.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        run = run_name or str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run)
        with SummaryWriter(log_dir=logdir) as w:
            fw = w._get_file_writer()
            for s in (exp, start, end):
                fw.add_summary(s, global_step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def flush(self):
        """Writes pending events of every run of this writer to disk."""
        for w in self.all_writers.values():
            w.flush()

    def close(self):
        """Flushes and closes every event file of this writer; a later ``add_*`` opens a new file."""
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = None
        self.all_writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


for _name in ("add_image", "add_images", "add_image_with_boxes", "add_figure", "add_video", "add_audio",
              "add_graph", "add_embedding", "add_pr_curve", "add_pr_curve_raw", "add_custom_scalars",
              "add_custom_scalars_multilinechart", "add_custom_scalars_marginchart", "add_mesh", "add_onnx_graph",
              "add_tensor"):
    setattr(SummaryWriter, _name, _not_provided(_name))
del _name
