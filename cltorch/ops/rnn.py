"""Fused recurrent ops: the LSTM, GRU and Elman (tanh/relu) cells, and one layer-direction of a recurrence.

Kernels: ``cl_kernels/rnn.cl.mako`` (one program per dtype holds every cell's forward and backward). The matrix
products are GEMMs (``_gemm.gemm``, the template the matmul family uses); a cell kernel does the rest of a time
step, the gates' nonlinearities and the state update, in one launch. Gate order and formulas are PyTorch's
(LSTM i, f, g, o; GRU r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

Public functions (PyTorch's): :func:`lstm_cell`, :func:`gru_cell`, :func:`rnn_tanh_cell`, :func:`rnn_relu_cell`.

Registered ops:

* ``fused_lstm_cell(input_gates, hidden_gates, cx) -> (hy, cy)`` and ``fused_gru_cell(input_gates, hidden_gates,
  hx) -> hy`` (the forms of PyTorch's ``_thnn_fused_*_cell``): one kernel forward, one kernel backward; under
  ``create_graph=True`` the backward is composed from differentiable ops, so double backward works.
* ``rnn_layer`` (:func:`rnn_layer`): a whole sequence of one layer and one direction, given the input projection
  of every time step (one GEMM over the sequence, done by the caller). Per step it does one GEMM ``h @ W_hh^T``
  into the step's slice of a gates buffer and one cell launch (plus one GEMM ``h @ W_hr^T`` with LSTM
  projections); the backward walks the steps in reverse with one cell-backward launch and one GEMM
  ``dgates @ W_hh`` per step, then forms ``dW_hh`` (and ``dW_hr``) as one GEMM over the whole sequence. Packed
  sequences (PyTorch's layout: time-major, ``batch_sizes[t]`` rows per step, non-increasing) run the shrinking
  prefix of the batch at each step.

Errors: shapes that do not fit raise RuntimeError naming them; dtypes other than float32/float64 raise
NotImplementedError; operands on two devices raise RuntimeError naming both.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import call, register, is_grad_enabled
from .._tensor import Tensor
from ..backend import geometry
from . import gemm as _gemm
from .elementwise import common_device, pointwise
from .joins import cat
from .linalg import linear
from .softmax import kernel, is_host, compute_dtype, types_of

__all__ = ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "rnn_layer", "fused_lstm_cell",
           "fused_gru_cell"]

_L = np.int64
_T3 = [None, _L, _L]          # a tensor operand: buffer, element offset, row stride
# kernel name -> (leading long arguments, tensor operands)
_SIGS = {"lstm_fwd": (2, 6), "lstm_bwd": (3, 8), "gru_fwd": (2, 5), "gru_bwd": (3, 7),
         "rnn_tanh_fwd": (2, 3), "rnn_tanh_bwd": (3, 4), "rnn_relu_fwd": (2, 3), "rnn_relu_bwd": (3, 4)}
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_LOCAL = 64
_SWAP_MACS = 1 << 25     # multiply-adds of a step's GEMM above which it runs transposed (see _layer_fwd)


def _check_dtype(t, what):
    if t.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"{what}: the fused recurrent kernels support float32 and float64, got "
                                  f"{t.dtype.name} (convert with .float())")


def _launch(name, n, H, longs, tensors):
    """Run kernel ``name`` over ``n`` rows of ``H`` units; tensors are 2-D views with unit column stride."""
    if n <= 0 or H <= 0:
        return
    t0 = tensors[0]
    rt = t0._runtime()
    ct = compute_dtype(t0.dtype)
    nl, nt = _SIGS[name]
    vw = 8 if ct is D.float32 and H % 8 == 0 else 1
    k = kernel(rt, "rnn.cl.mako", name, [_L] * nl + _T3 * nt, T=t0.dtype.cl, CT=ct.cl, vw=vw,
               types=types_of(t0.dtype, ct))
    args = [n, H] + list(longs)
    for t in tensors:
        args += (t._storage.cl_buffer(), t._offset, t._stride[0])
    rt.launch(k, *geometry.nd(rt, n * (H // vw), _LOCAL, k), *args)


def _mm(c, a, b, beta=0.0):
    """``c = a @ b + beta * c`` on 2-D views (any strides), queued (no wait)."""
    M, K = a._shape
    N = b._shape[1]
    rt = c._runtime()
    with rt.lock:
        _gemm.gemm(rt, M, N, K, (a._storage.cl_buffer(), a._offset, a._stride[0], a._stride[1], 0),
                   (b._storage.cl_buffer(), b._offset, b._stride[0], b._stride[1], 0),
                   (c._storage.cl_buffer(), c._offset, c._stride[0], c._stride[1], 0), 1.0, beta, 1, c.dtype.np)
        rt.pending = True


def _rows(t, start, n):
    """Rows ``[start, start + n)`` of a 2-D tensor, as a view."""
    return t._view((n, t._shape[1]), t._stride, t._offset + start * t._stride[0])


def _tr(w):
    """The transpose of a 2-D tensor, as a view."""
    return w._view((w._shape[1], w._shape[0]), (w._stride[1], w._stride[0]), w._offset)


def _unit_cols(t):
    return t if t._stride[-1] == 1 or t._shape[-1] == 1 else t.contiguous()


def _empty(rows, cols, like):
    return Tensor._empty((rows, cols), like.dtype, like.device)


def _finish(*tensors):
    """The wait at the end of an op on cpu tensors, only where memory numpy shares is touched
    (``Runtime.finish_if_exposed``; queued host storages, temporaries included, stay alive until the queue syncs)."""
    if is_host(*tensors):
        tensors[0]._runtime().finish_if_exposed()


# ------------------------------------------------------------------------------------------------ the cells
def _cell_shapes(name, ig, hg, hx, G):
    common_device([ig, hg, hx])
    _check_dtype(ig, name)
    if ig.dim() != 2 or hx.dim() != 2 or ig._shape != hg._shape or ig._shape[0] != hx._shape[0] or \
            ig._shape[1] != G * hx._shape[1]:
        raise RuntimeError(f"{name}: expected input_gates and hidden_gates of shape (B, {G}*H) and a state of "
                           f"shape (B, H), got {list(ig._shape)}, {list(hg._shape)} and {list(hx._shape)}")
    if not (ig.dtype is hg.dtype is hx.dtype):
        raise RuntimeError(f"{name}: expected one dtype, got {ig.dtype.name}, {hg.dtype.name} and {hx.dtype.name}")


def _lstm_cell_fwd(ctx, ig, hg, cx):
    _cell_shapes("_thnn_fused_lstm_cell", ig, hg, cx, 4)
    ig, hg, cx = _unit_cols(ig), _unit_cols(hg), _unit_cols(cx)
    B, H = cx._shape
    hy, cy, ws = _empty(B, H, cx), _empty(B, H, cx), _empty(B, 4 * H, cx)
    _launch("lstm_fwd", B, H, (), (ig, hg, cx, hy, cy, ws))
    _finish(hy, ig, hg, cx)
    if ctx is not None:
        ctx.save_for_backward(ig, hg, cx, cy, ws)
    return hy, cy


def _lstm_cell_bwd(ctx, ghy, gcy):
    ig, hg, cx, cy, ws = ctx.saved_tensors
    if is_grad_enabled():      # create_graph: composed from differentiable ops
        H = cx._shape[1]
        i, f, g, o = (ig + hg).chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        tc = (f * cx + i * g).tanh()
        dc = gcy + ghy * o * (1 - tc * tc)
        dg = cat([dc * g * i * (1 - i), dc * cx * f * (1 - f), dc * i * (1 - g * g), ghy * tc * o * (1 - o)], 1)
        assert dg._shape[1] == 4 * H
        return dg, dg, dc * f
    B, H = cx._shape
    ghy, gcy = _unit_cols(ghy.to(cx.dtype)), _unit_cols(gcy.to(cx.dtype))
    dg, dcx = _empty(B, 4 * H, cx), _empty(B, H, cx)
    _launch("lstm_bwd", B, H, (0,), (ws, cx, cy, ghy, ghy, gcy, dcx, dg))
    _finish(dg, ghy, gcy)
    both = ctx.needs_input_grad[0] and ctx.needs_input_grad[1]
    return dg, (dg.clone() if both else dg), dcx


_lstm_cell_op = register("_thnn_fused_lstm_cell", _lstm_cell_fwd, _lstm_cell_bwd)


def _gru_cell_fwd(ctx, ig, hg, hx):
    _cell_shapes("_thnn_fused_gru_cell", ig, hg, hx, 3)
    ig, hg, hx = _unit_cols(ig), _unit_cols(hg), _unit_cols(hx)
    B, H = hx._shape
    hy, ws = _empty(B, H, hx), _empty(B, 4 * H, hx)
    _launch("gru_fwd", B, H, (), (ig, hg, hx, hy, ws))
    _finish(hy, ig, hg, hx)
    if ctx is not None:
        ctx.save_for_backward(ig, hg, hx, ws)
    return hy


def _gru_cell_bwd(ctx, ghy):
    ig, hg, hx, ws = ctx.saved_tensors
    if is_grad_enabled():
        ir, iz, inn = ig.chunk(3, 1)
        hr, hz, hn = hg.chunk(3, 1)
        r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
        n = (inn + r * hn).tanh()
        dn = ghy * (1 - z) * (1 - n * n)
        dz = ghy * (hx - n) * z * (1 - z)
        dr = dn * hn * r * (1 - r)
        return cat([dr, dz, dn], 1), cat([dr, dz, dn * r], 1), ghy * z
    B, H = hx._shape
    ghy = _unit_cols(ghy.to(hx.dtype))
    dig, dhg, dhx = _empty(B, 3 * H, hx), _empty(B, 3 * H, hx), _empty(B, H, hx)
    _launch("gru_bwd", B, H, (0,), (ws, hx, ghy, ghy, dig, dhg, dhx))
    _finish(dig, ghy)
    return dig, dhg, dhx


_gru_cell_op = register("_thnn_fused_gru_cell", _gru_cell_fwd, _gru_cell_bwd)


def fused_lstm_cell(input_gates, hidden_gates, cx):
    """One LSTM step from its two pre-activation blocks: ``gates = input_gates + hidden_gates`` (each (B, 4H), gate
    order i, f, g, o), ``cy = sigmoid(f) * cx + sigmoid(i) * tanh(g)``, ``hy = sigmoid(o) * tanh(cy)``.

    cx: (B, H). Returns (hy, cy), both (B, H). One kernel forward and one backward. float32/float64.
    """
    return call(_lstm_cell_op, input_gates, hidden_gates, cx)


def fused_gru_cell(input_gates, hidden_gates, hx):
    """One GRU step: input_gates = ``x W_ih^T + b_ih`` and hidden_gates = ``h W_hh^T + b_hh`` (each (B, 3H), order
    r, z, n); ``n = tanh(i_n + r * h_n)``, ``hy = n + z * (hx - n)``. hx: (B, H). Returns hy (B, H)."""
    return call(_gru_cell_op, input_gates, hidden_gates, hx)


def _unbatched(input, hx, name):  # noqa: A002
    if input.dim() not in (1, 2):
        raise RuntimeError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
    return input.dim() == 1


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """``torch.lstm_cell``: input (B, I) (or (I,)), hx = (h (B, H), c (B, H)), w_ih (4H, I), w_hh (4H, H), biases
    (4H,). Returns (hy, cy). Gates are two GEMMs and one fused cell kernel."""
    h, c = hx
    one = input.dim() == 1
    if one:
        input, h, c = input.unsqueeze(0), h.unsqueeze(0), c.unsqueeze(0)
    hy, cy = fused_lstm_cell(linear(input, w_ih, b_ih), linear(h, w_hh, b_hh), c)
    return (hy.squeeze(0), cy.squeeze(0)) if one else (hy, cy)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """``torch.gru_cell``: input (B, I), hx (B, H), w_ih (3H, I), w_hh (3H, H), biases (3H,). Returns hy (B, H)."""
    one = input.dim() == 1
    if one:
        input, hx = input.unsqueeze(0), hx.unsqueeze(0)
    hy = fused_gru_cell(linear(input, w_ih, b_ih), linear(hx, w_hh, b_hh), hx)
    return hy.squeeze(0) if one else hy


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """``torch.rnn_tanh_cell``: ``tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (composed: two GEMMs, add, tanh)."""
    return (linear(input, w_ih, b_ih) + linear(hx, w_hh, b_hh)).tanh()


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """``torch.rnn_relu_cell``: ``relu(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (composed)."""
    return (linear(input, w_ih, b_ih) + linear(hx, w_hh, b_hh)).relu()


# ----------------------------------------------------------------------------------------- one layer's sequence
class _Steps:
    """The time layout of a sequence: per step t its row count ``bs[t]`` and first row ``offs[t]`` in the
    (N, .) time-major buffers; the state buffers hold N + B rows: the initial state's B rows (first for the forward
    direction, last for the reverse) and each step's output at ``out0 + offs[t]``."""

    def __init__(self, N, B, batch_sizes, reverse):
        if batch_sizes is None:
            if B == 0 or N % B:
                raise RuntimeError(f"rnn_layer: {N} input rows are not a whole number of steps of batch {B}")
            self.bs = (B,) * (N // B)
            self.packed = False
        else:
            self.bs = tuple(int(b) for b in batch_sizes)
            if sum(self.bs) != N or (self.bs and self.bs[0] != B) or \
                    any(b1 < b2 for b1, b2 in zip(self.bs, self.bs[1:])) or any(b <= 0 for b in self.bs):
                raise RuntimeError(f"rnn_layer: batch_sizes {list(self.bs)} must be positive, non-increasing, start "
                                   f"at the batch size {B} and sum to the {N} input rows")
            self.packed = any(b != B for b in self.bs)
        self.T = len(self.bs)
        self.N, self.B, self.reverse = N, B, reverse
        offs, o = [], 0
        for b in self.bs:
            offs.append(o)
            o += b
        self.offs = offs
        self.h0 = N if reverse else 0         # row of the initial state in the state buffers
        self.out0 = 0 if reverse else B       # row of step 0's output
        self.order = range(self.T - 1, -1, -1) if reverse else range(self.T)

    def out(self, buf, t):
        return _rows(buf, self.out0 + self.offs[t], self.bs[t])

    def prev(self, buf, t, keep):
        """Step t's previous state: a view of ``buf`` (or, where packed reverse steps gain rows, a new tensor
        joining the later step's rows and the initial state's, appended to ``keep``)."""
        r = self.bs[t]
        if not self.reverse:
            return _rows(buf, 0 if t == 0 else self.out0 + self.offs[t - 1], r)
        if t == self.T - 1:
            return _rows(buf, self.h0, r)
        r1 = self.bs[t + 1]
        if r1 == r:
            return _rows(buf, self.offs[t + 1], r)
        j = cat([_rows(buf, self.offs[t + 1], r1), _rows(buf, self.h0 + r1, r - r1)])
        keep.append(j)
        return j

    def all_prev(self, buf, keep):
        """Every step's previous state stacked in step order (N rows, aligned with the gates' rows)."""
        if not self.packed:
            return _rows(buf, self.B if self.reverse else 0, self.N)
        return cat([self.prev(buf, t, keep) for t in range(self.T)])

    def final(self, buf):
        """The state after each sequence's last step, (B, width), in batch order (a new tensor)."""
        if self.reverse or not self.packed:
            t = 0 if self.reverse else self.T - 1
            return _rows(buf, self.out0 + self.offs[t], self.B).clone()
        parts = []
        for t in range(self.T - 1, -1, -1):
            lo = self.bs[t + 1] if t + 1 < self.T else 0
            if self.bs[t] > lo:
                parts.append(_rows(buf, self.out0 + self.offs[t] + lo, self.bs[t] - lo))
        return cat(parts)


def _layer_fwd(ctx, mode, xg, hx, cx, w_hh, b_hh, w_hr, batch_sizes, reverse):
    G = _GATES[mode]
    lstm, gru = mode == "LSTM", mode == "GRU"
    _check_dtype(xg, f"rnn_layer({mode})")
    common_device([t for t in (xg, hx, cx, w_hh, b_hh, w_hr) if t is not None])
    N, GH = xg._shape
    H = GH // G
    B, P = hx._shape
    if GH != G * H or w_hh._shape != (GH, P) or (w_hr is not None and w_hr._shape != (P, H)) or \
            (w_hr is None and P != H) or (lstm and (cx is None or cx._shape != (B, H))) or \
            (b_hh is not None and b_hh._shape != (GH,)):
        raise RuntimeError(f"rnn_layer({mode}): shapes do not fit: input gates {list(xg._shape)}, hx {list(hx._shape)}"
                           f", cx {None if cx is None else list(cx._shape)}, w_hh {list(w_hh._shape)}, w_hr "
                           f"{None if w_hr is None else list(w_hr._shape)}")
    for t in (hx, cx, w_hh, b_hh, w_hr):
        if t is not None and t.dtype is not xg.dtype:
            raise RuntimeError(f"rnn_layer({mode}): expected every operand in {xg.dtype.name}, got {t.dtype.name}")
    st = _Steps(N, B, batch_sizes, reverse)
    xg, w_hh = _unit_cols(xg), w_hh
    S = _empty(N + B, P, xg)
    _rows(S, st.h0, B).copy_(hx)
    C = WS = HR = HG = None
    if lstm:
        C = _empty(N + B, H, xg)
        _rows(C, st.h0, B).copy_(cx)
        WS = _empty(N, 4 * H, xg)
        if w_hr is not None:
            HR = _empty(N, H, xg)
    elif gru:
        WS = _empty(N, 4 * H, xg)
        HG = _empty(N, GH, xg)
        if b_hh is not None:
            HG.copy_(b_hh.expand(N, GH))
    else:
        HG = _empty(B, H, xg)
    # The step's GEMM h @ W_hh^T: for large steps as (W_hh @ h^T)^T, whose kernel runs the wide weight at a better
    # rate (it packs only the small h^T, one more launch); for small steps, where launches dominate, as h @ Wt with
    # a transposed copy of W_hh made once per call and read in place. Measured here (PoCL, 2 cores), per step:
    # B=32, P=256, 4H=1024: 0.17 ms against 0.25 ms; B=20, P=64, 4H=256: 0.036 ms against 0.019 ms. Later, with
    # the copy read in place (h @ Wt, not h @ W_hh^T packed per step) and devices/pocl-cpu-avx512.toml's rows,
    # B=32, P=256, 4H=1024: 0.07-0.09 ms (copy) against 0.17-0.20 ms (transposed product), so the copy now serves
    # steps up to 2^25 multiply-adds.
    whT = None if xg._shape[0] // max(st.T, 1) * GH * P >= _SWAP_MACS else _tr(w_hh).contiguous()

    def step_mm(hg, hp, beta=0.0):
        if whT is None:
            _mm(_tr(hg), w_hh, _tr(hp), beta)
        else:
            _mm(hg, hp, whT, beta)
    keep = []
    for t in st.order:
        r, o = st.bs[t], st.offs[t]
        ig = _rows(xg, o, r)
        hp = st.prev(S, t, keep)
        if lstm:
            hg = _rows(WS, o, r)
            step_mm(hg, hp)
            hy = _rows(HR, o, r) if HR is not None else st.out(S, t)
            _launch("lstm_fwd", r, H, (), (ig, hg, st.prev(C, t, keep), hy, st.out(C, t), hg))
            if HR is not None:
                _mm(_tr(st.out(S, t)), w_hr, _tr(hy))
        elif gru:
            hg = _rows(HG, o, r)
            step_mm(hg, hp, 1.0 if b_hh is not None else 0.0)
            _launch("gru_fwd", r, H, (), (ig, hg, hp, st.out(S, t), _rows(WS, o, r)))
        else:
            hg = _rows(HG, 0, r)
            step_mm(hg, hp)
            _launch("rnn_tanh_fwd" if mode == "RNN_TANH" else "rnn_relu_fwd", r, H, (), (ig, hg, st.out(S, t)))
    out = _rows(S, st.out0, N)
    hn = st.final(S)
    cn = st.final(C) if lstm else None
    _finish(S, xg, hx)
    if ctx is not None:
        ctx.save_for_backward(S, C, WS, HR, w_hh, w_hr)
        ctx.st, ctx.mode, ctx.has_bhh = st, mode, b_hh is not None
    return out, hn, cn


def _layer_bwd(ctx, g_out, g_hn, g_cn):
    if is_grad_enabled():
        raise NotImplementedError("double backward (create_graph=True) through the fused recurrent layer "
                                  "(nn.LSTM/GRU/RNN) is not implemented; step the cell modules (nn.LSTMCell, ...) "
                                  "in a loop for higher-order gradients")
    S, C, WS, HR, w_hh, w_hr = ctx.saved_tensors
    st, mode = ctx.st, ctx.mode
    lstm, gru = mode == "LSTM", mode == "GRU"
    N, B, P = st.N, st.B, S._shape[1]
    GH = w_hh._shape[0]
    H = GH // _GATES[mode]
    dt = S.dtype

    def dense(g, rows, cols):
        if g is None:
            return Tensor._empty((rows, cols), dt, S.device).zero_()
        g = g.to(dt) if g.dtype is not dt else g
        return g.contiguous() if g._stride != (cols, 1) else g

    g_out = dense(g_out, N, P)
    dh = dense(g_hn, B, P).clone()
    dc = dense(g_cn, B, H).clone() if lstm else None
    dG = _empty(N, GH, S)
    dHG = _empty(N, GH, S) if gru else dG
    dHT = _empty(N, P, S) if HR is not None else None
    dHR = _empty(B, H, S) if HR is not None else None
    keep = []
    for t in reversed(st.order):
        r, o = st.bs[t], st.offs[t]
        dhr = _rows(dh, 0, r)
        go = _rows(g_out, o, r)
        if lstm:
            dgt = _rows(dG, o, r)
            dcr = _rows(dc, 0, r)
            if dHT is not None:
                tot = _rows(dHT, o, r)
                pointwise("x0 + x1", [dhr, go], dt, dt, out=tot)
                dhraw = _rows(dHR, 0, r)
                _mm(dhraw, tot, w_hr)
                _launch("lstm_bwd", r, H, (0,), (_rows(WS, o, r), st.prev(C, t, keep), st.out(C, t), dhraw, dhraw,
                                                 dcr, dcr, dgt))
            else:
                _launch("lstm_bwd", r, H, (1,), (_rows(WS, o, r), st.prev(C, t, keep), st.out(C, t), dhr, go, dcr,
                                                 dcr, dgt))
            _mm(dhr, dgt, w_hh)
        elif gru:
            dhg = _rows(dHG, o, r)
            _launch("gru_bwd", r, H, (1,), (_rows(WS, o, r), st.prev(S, t, keep), dhr, go, _rows(dG, o, r), dhg,
                                            dhr))
            _mm(dhr, dhg, w_hh, 1.0)
        else:
            dgt = _rows(dG, o, r)
            _launch("rnn_tanh_bwd" if mode == "RNN_TANH" else "rnn_relu_bwd", r, H, (1,), (st.out(S, t), dhr, go,
                                                                                           dgt))
            _mm(dhr, dgt, w_hh)
    need = ctx.needs_input_grad
    dw_hh = db_hh = dw_hr = None
    if need[4]:
        dw_hh = _empty(GH, P, S)
        _mm(dw_hh, _tr(dHG), st.all_prev(S, keep))
    if gru and ctx.has_bhh and need[5]:
        db_hh = dHG.sum(0)
    if HR is not None and need[6]:
        dw_hr = _empty(P, H, S)
        _mm(dw_hr, _tr(dHT), HR)
    _finish(dG, g_out)
    return None, dG, dh, dc, dw_hh, db_hh, dw_hr, None, None


_layer_op = register("rnn_layer", _layer_fwd, _layer_bwd)


def rnn_layer(mode, input_gates, hx, cx, w_hh, b_hh=None, w_hr=None, batch_sizes=None, reverse=False):
    """One layer and direction of a recurrence over a whole sequence, from its input projection.

    mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU" (G = 4, 3, 1, 1 gate blocks).
    input_gates: (N, G*H), time-major rows ``x_t W_ih^T + b_ih`` (LSTM and Elman: plus ``b_hh``, which they only
        add), N = T*B for a padded batch or ``sum(batch_sizes)`` for a packed one.
    hx: (B, P) initial hidden state (P = proj_size, else H); cx: (B, H) initial cell state (LSTM only, else None).
    w_hh: (G*H, P); b_hh: (G*H,) for GRU (added to ``h W_hh^T`` before the reset gate multiplies it), else None;
    w_hr: (P, H) LSTM projection weight or None.
    batch_sizes: None (every step has B rows) or PyTorch's packed ``batch_sizes`` (non-increasing, first = B).
    reverse: run from the last step to the first (the reverse direction of a bidirectional layer).

    Returns (output (N, P) in the input's row order, h_n (B, P), c_n (B, H) or None). Differentiable in
    input_gates, hx, cx, w_hh, b_hh and w_hr (first order; double backward raises NotImplementedError).
    """
    if mode not in _GATES:
        raise ValueError(f"rnn_layer: unknown mode {mode!r} (expected one of {sorted(_GATES)})")
    bs = None if batch_sizes is None else tuple(int(b) for b in batch_sizes)
    return call(_layer_op, mode, input_gates, hx, cx, w_hh, b_hh, w_hr, bs, bool(reverse))
