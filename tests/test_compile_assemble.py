"""cltorch.compile's data-movement rewrites (``cltorch/_capture/assemble.py``): the gradients of slices written in
place of zero-filled buffers and their sums, and copies of copies composed into one copy. Each compiled result is
compared with the eager run bit for bit (and with torch), and each rewrite with a case where it must not apply."""
import numpy as np
import torch as T

import cltorch as torch
from cltorch._capture import assemble
from cltorch._capture.fusion import _ew

DEV = "cl:0"


def _np(t):
    return t.detach().cpu().numpy()


def _kinds(graph):
    """(zero fills, full adds, pure copies) among the graph's launches."""
    fills = adds = copies = 0
    for e in graph.trace.entries:
        info = _ew(e) if e[0] == "k" else None
        if info is None:
            continue
        if assemble._is_zero_fill(info):
            fills += 1
        elif info[0].get("expr", "").strip() == "x0 + x1":
            adds += 1
        elif assemble._is_copy(info):
            copies += 1
    return fills, adds, copies


def _run(fn, *args, calls=6, grad=False):
    cf = torch.compile(fn)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        for _ in range(calls):
            out = cf(*args)
    assert cf.fallbacks() == []
    assert cf.graphs(), "the function did not reach replay"
    return cf, out


def _split_step(x, parts):
    def step():
        x.grad = None
        q, k, v = x.split(4, dim=1)
        loss = 0
        if "q" in parts:
            loss = loss + q.sin().sum()
        if "k" in parts:
            loss = loss + (k * 3.0).sum()
        if "v" in parts:
            loss = loss + v.tanh().sum()
        loss.backward()
        return x.grad.clone()
    return step


def _torch_split_grad(xn, parts):
    xt = T.from_numpy(xn).requires_grad_()
    q, k, v = xt.split(4, dim=1)
    loss = 0
    if "q" in parts:
        loss = loss + q.sin().sum()
    if "k" in parts:
        loss = loss + (k * 3.0).sum()
    if "v" in parts:
        loss = loss + v.tanh().sum()
    loss.backward()
    return xt.grad.numpy()


def test_split_gradients_are_written_in_place_of_the_sum():
    xn = np.random.default_rng(0).standard_normal((16, 12)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV).requires_grad_()
    step = _split_step(x, "qkv")
    eager = _np(step())
    cf, g = _run(step, grad=True)
    fills, adds, _ = _kinds(cf.graphs()[0])
    assert (fills, adds) == (0, 0)               # three slices cover the gradient: no fill, no sum left
    np.testing.assert_array_equal(_np(g), eager)
    np.testing.assert_allclose(_np(g), _torch_split_grad(xn, "qkv"), rtol=1e-5, atol=1e-6)


def test_split_gradient_with_a_gap_keeps_one_zero_fill():
    xn = np.random.default_rng(1).standard_normal((16, 12)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV).requires_grad_()
    step = _split_step(x, "qv")                   # k's columns get no gradient: zeros there
    eager = _np(step())
    cf, g = _run(step, grad=True)
    fills, adds, _ = _kinds(cf.graphs()[0])
    assert (fills, adds) == (1, 0)
    got = _np(g)
    np.testing.assert_array_equal(got, eager)
    np.testing.assert_array_equal(got[:, 4:8], np.zeros((16, 4), np.float32))
    np.testing.assert_allclose(got, _torch_split_grad(xn, "qv"), rtol=1e-5, atol=1e-6)


def _slices(x, keep_part=False, overlap=False):
    z1 = torch.zeros(6, 12, device=DEV)
    z1[:, 0:6 if overlap else 4] = x[:, 0:6 if overlap else 4] * 2.0
    z2 = torch.zeros(6, 12, device=DEV)
    z2[:, 4:12] = x[:, 4:12] * 3.0
    s = z1 + z2
    return (s, z1) if keep_part else s


def _slices_ref(xn, overlap=False):
    z1 = np.zeros((6, 12), np.float32)
    c = 6 if overlap else 4
    z1[:, :c] = xn[:, :c] * np.float32(2.0)
    z2 = np.zeros((6, 12), np.float32)
    z2[:, 4:] = xn[:, 4:] * np.float32(3.0)
    return z1 + z2, z1


def test_slice_writes_into_zeros_then_summed_assemble():
    xn = np.random.default_rng(2).standard_normal((6, 12)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)
    cf, s = _run(_slices, x)
    assert _kinds(cf.graphs()[0])[:2] == (0, 0)
    assert cf.graphs()[0].launch_count == 4          # two products, two slice writes into the sum's buffer
    np.testing.assert_array_equal(_np(s), _slices_ref(xn)[0])


def test_a_summand_seen_outside_or_overlapping_slices_do_not_assemble():
    xn = np.random.default_rng(3).standard_normal((6, 12)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)
    # z1 is returned: it must hold its own zeros and slice, and the sum must still be right
    cf, (s, z1) = _run(lambda t: _slices(t, keep_part=True), x)
    ref_s, ref_z1 = _slices_ref(xn)
    assert _kinds(cf.graphs()[0])[1] == 1
    np.testing.assert_array_equal(_np(s), ref_s)
    np.testing.assert_array_equal(_np(z1), ref_z1)
    # columns 4 and 5 are written in both summands: their values are sums, the add stays
    cf, s = _run(lambda t: _slices(t, overlap=True), x)
    assert _kinds(cf.graphs()[0])[1] == 1
    np.testing.assert_array_equal(_np(s), _slices_ref(xn, overlap=True)[0])


def test_negative_zero_slices_keep_their_value():
    # the sum made -0.0 + 0.0 = +0.0; written in place the slice keeps -0.0: equal values (==), as documented
    xn = np.full((6, 12), -0.0, np.float32)
    x = torch.from_numpy(xn).to(DEV)
    cf, s = _run(_slices, x)
    got = _np(s)
    np.testing.assert_array_equal(got, np.zeros((6, 12), np.float32))
    assert np.signbit(got).all()                       # written in place: -0.0 * 2 and -0.0 * 3 stay -0.0
    assert not np.signbit(_np(_slices(x))).any()       # eager: -0.0 + 0.0


def _raw_trace(fn, *args):
    """The unfused trace of ``fn`` (compiled with fuse=False) and the compiled function."""
    from cltorch._capture.compile import compile_fn
    cf = compile_fn(fn, fuse=False)
    with torch.no_grad():
        for _ in range(6):
            cf(*args)
    assert cf.graphs()
    return cf.graphs()[0].trace


def test_copy_of_a_copy_is_one_copy():
    xn = np.random.default_rng(4).standard_normal((2, 3, 4, 5)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)

    def fn(t):
        y = t.permute(0, 2, 1, 3).contiguous()             # [2, 4, 3, 5], contiguous
        z = torch.zeros(2, 4, 3, 7, device=DEV)
        z[..., 1:6] = y                                    # a copy of y into a strided view
        return z

    ref = np.zeros((2, 4, 3, 7), np.float32)
    ref[..., 1:6] = xn.transpose(0, 2, 1, 3)
    cf, out = _run(fn, x)
    assert cf.graphs()[0].launch_count == 2                # the fill and one copy from t
    assert _kinds(cf.graphs()[0]) == (1, 0, 1)
    np.testing.assert_array_equal(_np(out), ref)
    raw = _raw_trace(fn, x)
    got, remap = assemble.compose_copies(raw, set())
    assert len(got.entries) == len(raw.entries) - 1


def test_copy_whose_intermediate_is_seen_is_not_composed():
    xn = np.random.default_rng(5).standard_normal((6, 20)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)

    def fn(t):
        y = t.t().contiguous()
        z = torch.zeros(20, 8, device=DEV)
        z[:, 1:7] = y
        return y, z

    ref = np.zeros((20, 8), np.float32)
    ref[:, 1:7] = xn.T
    cf, (y, z) = _run(fn, x)
    assert cf.graphs()[0].launch_count == 3
    np.testing.assert_array_equal(_np(y), xn.T)
    np.testing.assert_array_equal(_np(z), ref)


def test_converting_copies_are_not_composed():
    xn = (np.random.default_rng(6).standard_normal((6, 20)) * 1000).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)

    def fn(t):
        y = t.t().contiguous()
        z = torch.zeros(20, 8, device=DEV, dtype=torch.int32)
        z[:, 1:7] = y                                      # float -> int32 rounds: not a pure copy
        return z

    ref = np.zeros((20, 8), np.int32)
    ref[:, 1:7] = xn.T.astype(np.int32)
    raw = _raw_trace(fn, x)
    got, _ = assemble.compose_copies(raw, set())
    assert len(got.entries) == len(raw.entries)
    cf, z = _run(fn, x)
    np.testing.assert_array_equal(_np(z), ref)


def test_copy_back_into_its_own_source_is_not_composed():
    xn = np.random.default_rng(7).standard_normal((16, 16)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)

    def fn(t):
        a = t * 1.0
        a.copy_(a.t().contiguous())          # composed, it would read and write a's buffer in one launch
        return a

    raw = _raw_trace(fn, x)
    got, _ = assemble.compose_copies(raw, set())
    assert len(got.entries) == len(raw.entries)
    cf, out = _run(fn, x)
    np.testing.assert_array_equal(_np(out), xn.T)


def _runs(graph):
    from cltorch._capture.pairs import launch_params
    return [p.get("run") for p in (launch_params(e, "elementwise.cl.mako", "ew") for e in graph.trace.entries)
            if p and p.get("rank")]


def test_short_rows_take_one_work_item_per_row():
    xn = np.random.default_rng(8).standard_normal((8, 4, 16, 32)).astype(np.float32)
    x = torch.from_numpy(xn).to(DEV)

    def fn(t):
        return t.permute(0, 2, 1, 3).contiguous() * 2.0      # rows of 32 on the strided path

    eager = _np(fn(x))
    cf, out = _run(fn, x)
    assert _runs(cf.graphs()[0]) == [32]
    np.testing.assert_array_equal(_np(out), eager)
    np.testing.assert_array_equal(_np(out), xn.transpose(0, 2, 1, 3) * np.float32(2.0))


def test_long_or_few_rows_keep_the_strided_run():
    from cltorch._capture.assemble import MAX_ROW, MIN_ROWS
    long_rows = np.random.default_rng(9).standard_normal((4, 3, 2 * MAX_ROW)).astype(np.float32)
    few_rows = np.random.default_rng(10).standard_normal((2, MIN_ROWS // 4, 32)).astype(np.float32)
    for xn in (long_rows, few_rows):
        x = torch.from_numpy(xn).to(DEV)
        cf, out = _run(lambda t: t.transpose(0, 1).contiguous(), x)
        runs = _runs(cf.graphs()[0])
        assert len(runs) == 1 and runs[0] < xn.shape[-1]
        np.testing.assert_array_equal(_np(out), xn.transpose(1, 0, 2))
