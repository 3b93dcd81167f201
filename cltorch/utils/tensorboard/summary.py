"""Summary protos for ``SummaryWriter``: scalars, histograms, text and hyperparameters, built with the
``tensorboard`` package's protos and plugin metadata (the formats TensorBoard reads).

Values may be cltorch tensors (any device), numpy arrays or Python numbers; ``make_np`` turns them into numpy.
"""
import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary, HistogramProto
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

__all__ = ["make_np", "scalar", "histogram", "text", "hparams"]


def make_np(x):
    """A numpy array of ``x``: a cltorch (or torch) tensor is detached and read back from its device."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


def _scalar_value(x, name):
    a = make_np(x)
    if a.size != 1:
        raise ValueError(f"{name} must be a scalar (one element), got an array of shape {tuple(a.shape)}")
    return a.reshape(()).item()


def scalar(name, value, new_style=False, double_precision=False):
    """A scalar summary: ``simple_value`` (float32) by default, or with ``new_style`` a 0-d tensor tagged for the
    scalars plugin (float64 with ``double_precision``)."""
    v = float(_scalar_value(value, "scalar_value"))
    if not new_style:
        return Summary(value=[Summary.Value(tag=name, simple_value=v)])
    from tensorboard.plugins.scalar import metadata
    meta = metadata.create_summary_metadata(display_name=name, description="")
    if double_precision:
        t = TensorProto(dtype="DT_DOUBLE", double_val=[v], tensor_shape=TensorShapeProto())
    else:
        t = TensorProto(dtype="DT_FLOAT", float_val=[v], tensor_shape=TensorShapeProto())
    return Summary(value=[Summary.Value(tag=name, tensor=t, metadata=meta)])


def _tf_bucket_edges():
    # TensorFlow's default histogram buckets: 1e-12 growing by 10 % up to 1e20, mirrored for negatives, with 0.
    pos = [1e-12]
    while pos[-1] < 1e20:
        pos.append(pos[-1] * 1.1)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


def histogram(name, values, bins="tensorflow", max_bins=None):
    """A histogram summary of ``values`` (any shape, flattened). ``bins``: ``"tensorflow"`` (TensorFlow's
    exponential buckets) or anything ``numpy.histogram`` accepts (an int, ``"auto"``, ``"fd"``, edges). Raises
    ValueError for an empty input."""
    a = make_np(values).astype(np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError("The histogram is empty, please file a bug report.")
    if isinstance(bins, str) and bins == "tensorflow":
        bins = _tf_bucket_edges()
    counts, edges = np.histogram(a, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        step = -(-len(counts) // max_bins)
        pad = (-len(counts)) % step
        counts = np.pad(counts, (0, pad)).reshape(-1, step).sum(axis=1)
        edges = np.concatenate([edges[:-1:step], edges[-1:]])
    nz = np.nonzero(counts)[0]
    lo, hi = (nz[0], nz[-1] + 1) if nz.size else (0, len(counts))
    # keep one empty bucket on the left, as TensorBoard draws from the left edge of the first bucket
    lo = max(lo - 1, 0)
    proto = HistogramProto(min=float(a.min()), max=float(a.max()), num=int(a.size), sum=float(a.sum()),
                           sum_squares=float(np.dot(a, a)), bucket_limit=edges[1:][lo:hi].tolist(),
                           bucket=counts[lo:hi].astype(np.float64).tolist())
    return Summary(value=[Summary.Value(tag=name, histo=proto)])


def text(tag, text_string):
    """A text summary (the text plugin's string tensor), under ``tag + "/text_summary"`` as PyTorch writes it."""
    from tensorboard.plugins.text import metadata
    meta = metadata.create_summary_metadata(display_name=tag, description="")
    t = TensorProto(dtype="DT_STRING", string_val=[str(text_string).encode("utf-8")],
                    tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta, tensor=t)])


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The hparams plugin's three summaries (experiment, session start, session end) for one run.

    ``hparam_dict`` values: bool, str, int, float, or a 0-d/1-element tensor; ``metric_dict`` keys are the metric
    tags. Raises TypeError for other value types and ValueError for a discrete domain that omits a value.
    """
    from google.protobuf.struct_pb2 import ListValue
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError("hparam_dict and metric_dict should be dictionaries.")
    hparam_domain_discrete = hparam_domain_discrete or {}
    for k, dom in hparam_domain_discrete.items():
        if k not in hparam_dict or not isinstance(dom, list) or hparam_dict[k] not in dom:
            raise ValueError(f"hparam_domain_discrete[{k!r}] must be a list holding hparam_dict[{k!r}]")
    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if not isinstance(v, (bool, str, int, float)):
            if hasattr(v, "detach"):
                v = _scalar_value(v, f"hparam {k!r}")
            else:
                raise TypeError(f"hparam {k!r}: value should be one of int, float, str, bool, or a tensor, got "
                                f"{type(v).__name__}")
        dom = hparam_domain_discrete.get(k)
        if isinstance(v, bool):
            start.hparams[k].bool_value = v
            dtype = api_pb2.DATA_TYPE_BOOL
        elif isinstance(v, (int, float)):
            start.hparams[k].number_value = float(v)
            dtype = api_pb2.DATA_TYPE_FLOAT64
        else:
            start.hparams[k].string_value = v
            dtype = api_pb2.DATA_TYPE_STRING
        info = api_pb2.HParamInfo(name=k, type=dtype)
        if dom is not None:
            lv = ListValue()
            for d in dom:
                lv.values.add().CopyFrom(_struct_value(d))
            info.domain_discrete.CopyFrom(lv)
        infos.append(info)
    exp = api_pb2.Experiment(hparam_infos=infos,
                             metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=k)) for k in metric_dict])

    def one(tag, **field):
        data = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **field)
        return Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))])

    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    return (one(metadata.EXPERIMENT_TAG, experiment=exp),
            one(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            one(metadata.SESSION_END_INFO_TAG, session_end_info=end))


def _struct_value(d):
    from google.protobuf.struct_pb2 import Value
    if isinstance(d, bool):
        return Value(bool_value=d)
    if isinstance(d, (int, float)):
        return Value(number_value=float(d))
    return Value(string_value=str(d))
