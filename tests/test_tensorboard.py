"""cltorch.utils.tensorboard.SummaryWriter: event files read back with TensorBoard's own EventAccumulator."""
import os

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

import cltorch  # noqa: E402
from cltorch.utils.tensorboard import SummaryWriter  # noqa: E402


def _load(path):
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_from_tensors_numpy_and_numbers(tmp_path, device):
    values = [cltorch.tensor(1.5, device=device), np.float32(2.25), 3, cltorch.tensor([4.75], device=device)]
    with SummaryWriter(log_dir=tmp_path) as w:
        for step, v in enumerate(values):
            w.add_scalar("loss/train", v, step * 10)
    ev = _load(tmp_path).Scalars("loss/train")
    assert [e.step for e in ev] == [0, 10, 20, 30]
    np.testing.assert_allclose([e.value for e in ev], [1.5, 2.25, 3.0, 4.75])


def test_scalar_rejects_arrays(tmp_path):
    with SummaryWriter(log_dir=tmp_path) as w:
        with pytest.raises(ValueError, match="shape \\(3,\\)"):
            w.add_scalar("x", cltorch.ones(3), 0)


def test_new_style_scalar_is_a_tensor(tmp_path):
    with SummaryWriter(log_dir=tmp_path) as w:
        w.add_scalar("acc", 0.125, 7, new_style=True, double_precision=True)
    ev = _load(tmp_path).Tensors("acc")
    assert ev[0].step == 7 and ev[0].tensor_proto.double_val[0] == 0.125


def test_add_scalars_one_run_per_tag(tmp_path):
    w = SummaryWriter(log_dir=tmp_path)
    for step in range(3):
        w.add_scalars("run", {"a": step, "b": -step}, step)
    w.close()
    a = _load(os.path.join(tmp_path, "run_a")).Scalars("run")
    b = _load(os.path.join(tmp_path, "run_b")).Scalars("run")
    assert [e.value for e in a] == [0, 1, 2] and [e.value for e in b] == [0, -1, -2]


def test_histogram_counts_and_stats(tmp_path, device):
    x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    with SummaryWriter(log_dir=tmp_path) as w:
        w.add_histogram("w", cltorch.tensor(x, device=device), 3)
        w.add_histogram("w10", x, 3, bins=10)
    acc = _load(tmp_path)
    h = acc.Histograms("w")[0].histogram_value
    assert h.num == 1000 and sum(h.bucket) == 1000
    assert h.min == pytest.approx(x.min()) and h.max == pytest.approx(x.max())
    assert h.sum == pytest.approx(float(x.astype(np.float64).sum()), abs=1e-3)
    h10 = acc.Histograms("w10")[0].histogram_value
    counts, edges = np.histogram(x.astype(np.float64), bins=10)
    np.testing.assert_array_equal(h10.bucket, counts)
    np.testing.assert_allclose(h10.bucket_limit, edges[1:])


def test_text_and_hparams(tmp_path):
    with SummaryWriter(log_dir=tmp_path) as w:
        w.add_text("notes", "hello **world**", 1)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "bn": True}, {"hparam/acc": 0.9}, run_name="h")
    t = _load(tmp_path).Tensors("notes/text_summary")[0]
    assert t.tensor_proto.string_val[0] == b"hello **world**"
    sub = _load(os.path.join(tmp_path, "h"))
    assert sub.Scalars("hparam/acc")[0].value == pytest.approx(0.9)
    from tensorboard.plugins.hparams import metadata
    content = sub.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content
    start = metadata.parse_session_start_info_plugin_data(content)
    assert start.hparams["lr"].number_value == 0.1 and start.hparams["opt"].string_value == "sgd"
    assert start.hparams["bn"].bool_value is True


def test_unprovided_methods_raise(tmp_path):
    with SummaryWriter(log_dir=tmp_path) as w:
        with pytest.raises(NotImplementedError, match="add_image"):
            w.add_image("img", np.zeros((3, 4, 4)))


def test_default_logdir_under_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_x")
    w.add_scalar("a", 1.0, 0)
    w.close()
    (run,) = os.listdir(tmp_path / "runs")
    assert run.endswith("_x") and _load(tmp_path / "runs" / run).Scalars("a")[0].value == 1.0
