"""The recurrent layers, cells, fused ops and packed-sequence utilities against PyTorch (same state_dict both ways)."""
import numpy as np
import pytest

import cltorch
import cltorch.nn as nn
from cltorch.nn.utils import rnn as rnn_utils
from cltorch.ops.rnn import fused_lstm_cell, fused_gru_cell, rnn_layer

torch = pytest.importorskip("torch")

I, H = 3, 8           # H = 8: the float8 kernel path; the cell tests also use H = 5 (scalar path)


def C(t, device, grad=False):
    r = cltorch.tensor(t.detach().numpy(), device=device)
    return r.requires_grad_(True) if grad else r


def N(t):
    return np.asarray(t.detach().cpu().numpy())


def close(a, b, tol=2e-5):
    np.testing.assert_allclose(N(a), N(b), rtol=tol, atol=tol)


def pair(kind, kw, device, to_torch=False):
    """(ours, torch's) with one set of weights: torch's copied into ours, or ours into torch's."""
    torch.manual_seed(0)
    cltorch.manual_seed(0)
    t = getattr(torch.nn, kind)(I, H, **kw)
    o = getattr(nn, kind)(I, H, **kw)
    if to_torch:
        t.load_state_dict({k: torch.from_numpy(N(v).copy()) for k, v in o.state_dict().items()})
    else:
        o.load_state_dict({k: cltorch.tensor(N(v)) for k, v in t.state_dict().items()})
    assert list(o.state_dict()) == list(t.state_dict())
    return o.to(device), t


def compare_backward(out_o, out_t, st_o, st_t, kind, rng, device, leaves, ours, ref):
    """States equal; then a loss weighting every output and state element differently gives equal gradients of
    each (ours, torch's) leaf pair and of every parameter."""
    sts_t = st_t if kind == "LSTM" else (st_t,)
    sts_o = st_o if kind == "LSTM" else (st_o,)
    for a, b in zip(sts_o, sts_t):
        close(a, b)
    ws = [rng.standard_normal(tuple(s.shape)).astype(np.float32) for s in (out_t,) + tuple(sts_t)]
    lt = sum((s * torch.from_numpy(w)).sum() for s, w in zip((out_t,) + tuple(sts_t), ws))
    lo = sum((s * cltorch.tensor(w, device=device)).sum() for s, w in zip((out_o,) + tuple(sts_o), ws))
    lt.backward()
    lo.backward()
    for a, b in leaves:
        close(a.grad, b.grad, 5e-5)
    po, pt = dict(ours.named_parameters()), dict(ref.named_parameters())
    for k in pt:
        close(po[k].grad, pt[k].grad, 1e-4)


MODES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("LSTM", {"proj_size": 3}), ("GRU", {})]
FLAGS = [dict(bidirectional=False, batch_first=False, init=True), dict(bidirectional=True, batch_first=True, init=False),
         dict(bidirectional=True, batch_first=False, init=True)]


def _states(kind, kw, D, B, rng):
    P = kw.get("proj_size", 0) or H
    h0 = torch.tensor(rng.standard_normal((2 * D, B, P)), dtype=torch.float32, requires_grad=True)
    if kind != "LSTM":
        return h0, None
    c0 = torch.tensor(rng.standard_normal((2 * D, B, H)), dtype=torch.float32, requires_grad=True)
    return h0, c0


@pytest.mark.parametrize("kind,kw", MODES, ids=["tanh", "relu", "lstm", "lstm_proj", "gru"])
@pytest.mark.parametrize("flags", FLAGS, ids=["plain", "bidir_bf_noinit", "bidir_init"])
def test_layer_values_and_grads(kind, kw, flags, device):
    flags = dict(flags)
    init = flags.pop("init")
    kw = dict(kw, num_layers=2, **flags)
    ours, ref = pair(kind, kw, device, to_torch=flags["bidirectional"])
    D = 2 if flags["bidirectional"] else 1
    rng = np.random.default_rng(1)
    T, B = 5, 3
    shape = (B, T, I) if flags["batch_first"] else (T, B, I)
    x = torch.tensor(rng.standard_normal(shape), dtype=torch.float32, requires_grad=True)
    h0, c0 = _states(kind, kw, D, B, rng)
    hx_t = ((h0, c0) if kind == "LSTM" else h0) if init else None
    X = C(x, device, True)
    H0 = C(h0, device, True)
    C0 = C(c0, device, True) if c0 is not None else None
    hx_o = ((H0, C0) if kind == "LSTM" else H0) if init else None
    out_t, st_t = ref(x, hx_t)
    out_o, st_o = ours(X, hx_o)
    assert tuple(out_o.shape) == tuple(out_t.shape)
    close(out_o, out_t)
    leaves = [(X, x)] + ([(H0, h0)] + ([(C0, c0)] if C0 is not None else []) if init else [])
    compare_backward(out_o, out_t, st_o, st_t, kind, rng, device, leaves, ours, ref)


@pytest.mark.parametrize("kind,kw", MODES, ids=["tanh", "relu", "lstm", "lstm_proj", "gru"])
def test_packed_unequal_lengths(kind, kw, device):
    kw = dict(kw, num_layers=2, bidirectional=True)
    ours, ref = pair(kind, kw, device)
    rng = np.random.default_rng(2)
    T, B = 5, 4
    lengths = [2, 5, 3, 1]          # unsorted: enforce_sorted=False sorts and restores the batch order
    x = torch.tensor(rng.standard_normal((T, B, I)), dtype=torch.float32, requires_grad=True)
    h0, c0 = _states(kind, kw, 2, B, rng)
    X, H0 = C(x, device, True), C(h0, device, True)
    C0 = C(c0, device, True) if c0 is not None else None
    pt = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    po = rnn_utils.pack_padded_sequence(X, lengths, enforce_sorted=False)
    assert N(po.batch_sizes).tolist() == pt.batch_sizes.tolist()
    close(po.data, pt.data)
    out_t, st_t = ref(pt, (h0, c0) if kind == "LSTM" else h0)
    out_o, st_o = ours(po, (H0, C0) if kind == "LSTM" else H0)
    assert isinstance(out_o, rnn_utils.PackedSequence)
    pad_t, len_t = torch.nn.utils.rnn.pad_packed_sequence(out_t, total_length=T + 1, padding_value=-1.0)
    pad_o, len_o = rnn_utils.pad_packed_sequence(out_o, total_length=T + 1, padding_value=-1.0)
    assert N(len_o).tolist() == len_t.tolist() == lengths
    close(pad_o, pad_t)
    leaves = [(X, x), (H0, h0)] + ([(C0, c0)] if C0 is not None else [])
    compare_backward(pad_o, pad_t, st_o, st_t, kind, rng, device, leaves, ours, ref)


def test_unbatched_input(device):
    ours, ref = pair("GRU", dict(num_layers=2), device)
    x = torch.randn(4, I)
    h0 = torch.randn(2, H)
    out_t, h_t = ref(x, h0)
    out_o, h_o = ours(C(x, device), C(h0, device))
    assert tuple(out_o.shape) == (4, H) and tuple(h_o.shape) == (2, H)
    close(out_o, out_t)
    close(h_o, h_t)


@pytest.mark.parametrize("Hc", [H, 5])
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell", "RNNCell_relu"])
def test_cells(kind, Hc, device):
    kw = {"nonlinearity": "relu"} if kind == "RNNCell_relu" else {}
    cls = kind.split("_")[0]
    torch.manual_seed(0)
    t = getattr(torch.nn, cls)(I, Hc, **kw)
    o = getattr(nn, cls)(I, Hc, **kw)
    o.load_state_dict({k: cltorch.tensor(N(v)) for k, v in t.state_dict().items()})
    o = o.to(device)
    assert list(o.state_dict()) == list(t.state_dict())
    x = torch.randn(3, I, requires_grad=True)
    h = torch.randn(3, Hc, requires_grad=True)
    c = torch.randn(3, Hc, requires_grad=True)
    X, Hh, Cc = C(x, device, True), C(h, device, True), C(c, device, True)
    if cls == "LSTMCell":
        rt = t(x, (h, c))
        ro = o(X, (Hh, Cc))
        (rt[0].sum() * 2 + (rt[1] * rt[1]).sum()).backward()
        (ro[0].sum() * 2 + (ro[1] * ro[1]).sum()).backward()
        close(ro[0], rt[0])
        close(ro[1], rt[1])
        close(Cc.grad, c.grad)
    else:
        rt, ro = t(x, h), o(X, Hh)
        close(ro, rt)
        (rt * rt).sum().backward()
        (ro * ro).sum().backward()
    close(X.grad, x.grad)
    close(Hh.grad, h.grad)
    for k, p in t.named_parameters():
        close(dict(o.named_parameters())[k].grad, p.grad, 5e-5)
    # default (zero) state and unbatched input
    close(o(X[0])[0] if cls == "LSTMCell" else o(X[0]), t(x[0])[0] if cls == "LSTMCell" else t(x[0]))


def test_dropout_between_layers(device):
    ours, ref = pair("LSTM", dict(num_layers=2, dropout=0.5), device)
    x = torch.randn(6, 4, I)
    ours.eval()
    ref.eval()
    out_eval, _ = ours(C(x, device))
    close(out_eval, ref(x)[0])                     # eval: dropout off, exact
    ours.train()
    cltorch.manual_seed(7)
    out_train, (h_n, c_n) = ours(C(x, device))
    assert tuple(out_train.shape) == (6, 4, H)
    assert not np.allclose(N(out_train), N(out_eval))
    # the same as layer 0, F.dropout (same seed: same mask), layer 1
    l0, l1 = nn.LSTM(I, H).to(device), nn.LSTM(H, H).to(device)
    sd = ours.state_dict()
    l0.load_state_dict({k: v for k, v in sd.items() if k.endswith("_l0")})
    l1.load_state_dict({k.replace("_l1", "_l0"): v for k, v in sd.items() if k.endswith("_l1")})
    cltorch.manual_seed(7)
    mid = nn.functional.dropout(l0(C(x, device))[0], 0.5, training=True)
    close(out_train, l1(mid)[0])
    frac = float((N(mid) == 0).mean())
    assert 0.35 < frac < 0.65                     # 192 elements at p = 0.5


def test_state_dict_names_and_flat_weights():
    for kind, kw in MODES:
        for extra in ({}, {"bidirectional": True, "num_layers": 3, "bias": False}):
            if "proj_size" in kw and extra:
                extra = dict(extra, bias=True)
            t = getattr(torch.nn, kind)(I, H, **kw, **extra)
            o = getattr(nn, kind)(I, H, **kw, **extra)
            assert list(o.state_dict()) == list(t.state_dict())
            assert [tuple(v.shape) for v in o.state_dict().values()] == [tuple(v.shape) for v in t.state_dict().values()]
            assert o._flat_weights_names == t._flat_weights_names
            assert [[tuple(p.shape) for p in ws] for ws in o.all_weights] == \
                [[tuple(p.shape) for p in ws] for ws in t.all_weights]
            assert repr(o) == repr(t)
    m = nn.LSTM(I, H)
    assert m.flatten_parameters() is None
    bound = 1 / np.sqrt(H)
    assert all(float(N(p).max()) <= bound and float(N(p).min()) >= -bound for p in m.parameters())


def test_errors():
    with pytest.raises(ValueError, match="proj_size"):
        nn.GRU(I, H, proj_size=2)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(I, H, proj_size=H)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(I, H, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        nn.LSTM(I, H, dropout=1.5)
    with pytest.warns(UserWarning, match="dropout"):
        nn.LSTM(I, H, dropout=0.2)
    m = nn.LSTM(I, H, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size"):
        m(cltorch.randn(4, 2, I + 1))
    with pytest.raises(RuntimeError, match="hidden"):
        m(cltorch.randn(4, 2, I), (cltorch.zeros(1, 2, H), cltorch.zeros(2, 2, H)))
    with pytest.raises(ValueError, match="2D or 3D"):
        m(cltorch.randn(1, 4, 2, I))
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(cltorch.randn(3, 2, I), [1, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn_utils.pack_padded_sequence(cltorch.randn(3, 2, I), [3, 0])
    with pytest.raises(ValueError, match="total_length"):
        rnn_utils.pad_packed_sequence(rnn_utils.pack_sequence([cltorch.randn(3, 1)]), total_length=2)
    with pytest.raises(NotImplementedError, match="float32 and float64"):
        fused_lstm_cell(cltorch.zeros(1, 4, dtype=cltorch.int64), cltorch.zeros(1, 4, dtype=cltorch.int64),
                        cltorch.zeros(1, 1, dtype=cltorch.int64))


def test_sequence_utils(device):
    rng = np.random.default_rng(3)
    seqs_t = [torch.tensor(rng.standard_normal((n, 2)), dtype=torch.float32) for n in (2, 4, 1)]
    seqs_o = [C(s, device) for s in seqs_t]
    for bf in (False, True):
        for side in ("right", "left"):
            close(rnn_utils.pad_sequence(seqs_o, batch_first=bf, padding_value=9.0, padding_side=side),
                  torch.nn.utils.rnn.pad_sequence(seqs_t, batch_first=bf, padding_value=9.0, padding_side=side))
    pk_o = rnn_utils.pack_sequence(seqs_o, enforce_sorted=False)
    pk_t = torch.nn.utils.rnn.pack_sequence(seqs_t, enforce_sorted=False)
    close(pk_o.data, pk_t.data)
    assert N(pk_o.sorted_indices).tolist() == pk_t.sorted_indices.tolist()
    assert N(pk_o.unsorted_indices).tolist() == pk_t.unsorted_indices.tolist()
    for a, b in zip(rnn_utils.unpack_sequence(pk_o), seqs_t):
        close(a, b)
    padded, lens = rnn_utils.pad_packed_sequence(pk_o, batch_first=True)
    for a, b in zip(rnn_utils.unpad_sequence(padded, lens, batch_first=True), seqs_t):
        close(a, b)
    perm = cltorch.tensor([2, 0, 3, 1])
    assert N(rnn_utils.invert_permutation(perm)).tolist() == [1, 3, 0, 2]
    assert rnn_utils.invert_permutation(None) is None
    assert pk_o.to(dtype=cltorch.float64).data.dtype is cltorch.float64


# ------------------------------------------------------------------------------------------ gradchecks (float64)
def _fp64(device):
    if not cltorch.cl.get_device_properties(0 if device == "cpu" else int(device.split(":")[1])).fp64:
        pytest.skip("device has no fp64")


def _r(rng, *shape, device):
    return cltorch.tensor(rng.standard_normal(shape), dtype=cltorch.float64, device=device).requires_grad_(True)


def test_gradcheck_cells(device):
    _fp64(device)
    rng = np.random.default_rng(4)
    B, h = 2, 3
    g = cltorch.autograd.gradcheck
    assert g(fused_lstm_cell, (_r(rng, B, 4 * h, device=device), _r(rng, B, 4 * h, device=device),
                               _r(rng, B, h, device=device)))
    assert g(fused_gru_cell, (_r(rng, B, 3 * h, device=device), _r(rng, B, 3 * h, device=device),
                              _r(rng, B, h, device=device)))
    # double backward (the composed backward under create_graph)
    assert cltorch.autograd.gradgradcheck(lambda a, b, c: fused_lstm_cell(a, b, c)[1],
                                          (_r(rng, B, 4 * h, device=device), _r(rng, B, 4 * h, device=device),
                                           _r(rng, B, h, device=device)))


@pytest.mark.parametrize("mode", ["LSTM", "LSTM_proj", "GRU", "RNN_TANH"])
def test_gradcheck_layer(mode, device):
    _fp64(device)
    rng = np.random.default_rng(5)
    bs = (3, 2, 2, 1)
    B, h = 3, 2
    proj = mode == "LSTM_proj"
    mode = "LSTM" if proj else mode
    G = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1}[mode]
    P = 1 if proj else h
    xg = _r(rng, sum(bs), G * h, device=device)
    x_pad = _r(rng, B * 2, G * h, device=device)
    hx = _r(rng, B, P, device=device)
    cx = _r(rng, B, h, device=device) if mode == "LSTM" else None
    w_hh = _r(rng, G * h, P, device=device)
    b_hh = _r(rng, G * h, device=device) if mode == "GRU" else None
    w_hr = _r(rng, P, h, device=device) if proj else None
    for reverse in (False, True):
        for sizes in (bs, None):
            x = xg if sizes else x_pad

            def f(*a):
                o = rnn_layer(mode, *a, batch_sizes=sizes, reverse=reverse)
                return tuple(t for t in o if t is not None)
            args = (x, hx, cx, w_hh, b_hh, w_hr)
            assert cltorch.autograd.gradcheck(f, args)


@pytest.mark.parametrize("kind,kw", [("LSTM", {}), ("GRU", {}), ("LSTM", {"proj_size": 3})], ids=["lstm", "gru", "proj"])
def test_transposed_step_gemm(kind, kw, device, monkeypatch):
    """Large steps run the recurrent GEMM as (W_hh @ h^T)^T: the same results through that path."""
    import cltorch.ops.rnn as ops_rnn
    monkeypatch.setattr(ops_rnn, "_SWAP_MACS", 0)
    test_packed_unequal_lengths(kind, kw, device)
    test_layer_values_and_grads(kind, kw, FLAGS[0], device)
