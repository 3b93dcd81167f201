"""The recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's signatures, parameter names and init.

Parameters per layer k and direction (suffix ``_reverse`` for the second direction of a bidirectional layer):
``weight_ih_l{k}`` (G*H, in), ``weight_hh_l{k}`` (G*H, P), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (G*H,), and with an
LSTM projection ``weight_hr_l{k}`` (P, H); G = 4 (LSTM, gates i, f, g, o), 3 (GRU, r, z, n), 1 (RNN); P =
proj_size or H. Every parameter starts U(-1/sqrt(H), 1/sqrt(H)), as PyTorch's. So ``state_dict``s load both ways.

Computation per layer and direction: one GEMM for the whole sequence's input projection (``addmm``), then the
fused recurrence op ``cltorch.ops.rnn.rnn_layer`` (per step one GEMM ``h @ W_hh^T`` and one cell kernel).
Dropout (``dropout`` > 0, training mode) applies to every layer's output except the last, as in PyTorch.
Packed input (:class:`~cltorch.nn.utils.rnn.PackedSequence`) runs each step on the sequences still active.

Shapes (PyTorch's): input (T, B, in) or (B, T, in) with ``batch_first``, or (T, in) unbatched, or a
PackedSequence; h_0 (D*num_layers, B, P) (and c_0 (D*num_layers, B, H) for LSTM), zeros when omitted.
Output (T, B, D*P) (batch_first: (B, T, D*P)), h_n like h_0. Bad shapes raise RuntimeError naming them.
Double backward through these layers raises NotImplementedError (the cells support it).
"""
import math
import numbers
import warnings

import cltorch as torch
from ...ops import rnn as _ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from ._factory import empty_param
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """Base of RNN, LSTM and GRU (PyTorch's ``RNNBase``): builds the parameters and runs the layers.

    mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU". Raises ValueError for a dropout outside [0, 1], a non-positive
    hidden_size or num_layers, or a proj_size that is negative, >= hidden_size, or given to a non-LSTM mode.
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          UserWarning, stacklevel=2)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        D = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real_h = proj_size if proj_size > 0 else hidden_size
        names = []
        for layer in range(num_layers):
            for d in range(D):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                in_sz = input_size if layer == 0 else real_h * D
                params = [("weight_ih" + sfx, (gate, in_sz)), ("weight_hh" + sfx, (gate, real_h))]
                if bias:
                    params += [("bias_ih" + sfx, (gate,)), ("bias_hh" + sfx, (gate,))]
                if proj_size > 0:
                    params.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for name, shape in params:
                    setattr(self, name, Parameter(empty_param(shape, device, dtype)))
                    names.append(name)
        self._flat_weights_names = names
        self._all_weights = [names[i:i + len(names) // (num_layers * D)]
                             for i in range(0, len(names), len(names) // (num_layers * D))]
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, in PyTorch's order (w_ih, w_hh, b_ih, b_hh[, w_hr])."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """Accepted for PyTorch compatibility. PyTorch packs the weights into one buffer for cuDNN; the kernels here
        read each parameter where it is, so there is nothing to pack and this call leaves everything as it is."""
        return None

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------------------------------------ forward
    def _state_shape(self, B, cell=False):
        D = 2 if self.bidirectional else 1
        width = self.hidden_size if cell or self.proj_size == 0 else self.proj_size
        return (self.num_layers * D, B, width)

    def _check_state(self, h, shape, what):
        if tuple(h.shape) != shape:
            raise RuntimeError(f"Expected {what} size {shape}, got {list(h.shape)}")

    def forward(self, input, hx=None):  # noqa: A002
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        unbatched = False
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            bs = [int(b) for b in batch_sizes.tolist()]
            B = bs[0]
            x = data
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
            unbatched = input.dim() == 2
            x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
            T, B = x.shape[0], x.shape[1]
            x = x.reshape(T * B, x.shape[2])
            bs, sorted_indices, unsorted_indices = None, None, None
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{x.shape[-1]}")
        h0 = c0 = None
        if hx is not None:
            h0, c0 = (hx if lstm else (hx, None))
            if lstm and not isinstance(hx, tuple):
                raise RuntimeError(f"{name}: hx must be a tuple (h_0, c_0)")
            if unbatched:
                if h0.dim() != 2 or (c0 is not None and c0.dim() != 2):
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{h0.dim()}-D tensor")
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            if sorted_indices is not None:
                h0 = h0.index_select(1, sorted_indices)
                c0 = c0.index_select(1, sorted_indices) if c0 is not None else None
            self._check_state(h0, self._state_shape(B), "hidden")
            if lstm:
                self._check_state(c0, self._state_shape(B, cell=True), "cell")
        D = 2 if self.bidirectional else 1
        hs, cs = [], []
        layer_in = x
        per = len(self._all_weights[0])
        flat = self._flat_weights
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                w = flat[k * per:(k + 1) * per]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                w_hr = w[-1] if self.proj_size > 0 else None
                if self.bias:
                    b = b_ih if self.mode == "GRU" else b_ih + b_hh
                    xg = torch.addmm(b, layer_in, w_ih.t())
                else:
                    xg = torch.mm(layer_in, w_ih.t())
                hk = h0[k] if h0 is not None else torch.zeros(self._state_shape(B)[1:], dtype=x.dtype,
                                                               device=x.device)
                ck = None
                if lstm:
                    ck = c0[k] if c0 is not None else torch.zeros((B, self.hidden_size), dtype=x.dtype,
                                                                   device=x.device)
                out, hn, cn = _ops.rnn_layer(self.mode, xg, hk, ck, w_hh, b_hh if self.mode == "GRU" else None,
                                             w_hr, bs, reverse=d == 1)
                outs.append(out)
                hs.append(hn)
                cs.append(cn)
            layer_in = outs[0] if D == 1 else torch.cat(outs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        h_n = torch.stack(hs, 0)
        c_n = torch.stack(cs, 0) if lstm else None
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = c_n.index_select(1, unsorted_indices) if lstm else None
        if packed:
            output = PackedSequence(layer_in, batch_sizes, sorted_indices, unsorted_indices)
        else:
            output = layer_in.reshape(T, B, layer_in.shape[-1])
            if unbatched:
                output = output.squeeze(1)
                h_n = h_n.squeeze(1)
                c_n = c_n.squeeze(1) if lstm else None
            elif self.batch_first:
                output = output.transpose(0, 1)
        return output, ((h_n, c_n) if lstm else h_n)


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, act "tanh" (default) or "relu".

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``; ValueError for another nonlinearity, and for a proj_size
    (only LSTM has projections; accepted as a keyword so that the error is PyTorch's)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, proj_size=0):
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class LSTM(RNNBase):
    """LSTM (gates i, f, g, o; ``c' = f*c + i*g``, ``h' = o*tanh(c')``, then ``h' W_hr^T`` with proj_size > 0).

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False,
    proj_size=0, device=None, dtype=None)``; forward returns (output, (h_n, c_n))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """GRU (gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``).

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False,
    device=None, dtype=None)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, proj_size=0):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


# ------------------------------------------------------------------------------------------------------ cells
class RNNCellBase(Module):
    """Parameters of one cell: weight_ih (chunks*H, in), weight_hh (chunks*H, H), bias_ih, bias_hh (chunks*H,),
    all U(-1/sqrt(H), 1/sqrt(H))."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty_param((num_chunks * hidden_size, input_size), device, dtype))
        self.weight_hh = Parameter(empty_param((num_chunks * hidden_size, hidden_size), device, dtype))
        if bias:
            self.bias_ih = Parameter(empty_param((num_chunks * hidden_size,), device, dtype))
            self.bias_hh = Parameter(empty_param((num_chunks * hidden_size,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prep(self, input, hx):  # noqa: A002
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for h in (hx if isinstance(hx, tuple) else (hx,)):
                if h.dim() != input.dim():
                    raise RuntimeError(f"{type(self).__name__}: Expected hidden to be {input.dim()}D (as the input), "
                                       f"got {h.dim()}D instead")
        return input.dim() == 1

    def _zeros(self, input):  # noqa: A002
        shape = (self.hidden_size,) if input.dim() == 1 else (input.shape[0], self.hidden_size)
        return torch.zeros(shape, dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``; input (B, in) or (in,), hx like the output (zeros when
    omitted). ``RNNCell(input_size, hidden_size, bias=True, nonlinearity='tanh', device=None, dtype=None)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        self._prep(input, hx)
        hx = self._zeros(input) if hx is None else hx
        fn = torch.rnn_tanh_cell if self.nonlinearity == "tanh" else torch.rnn_relu_cell
        return fn(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class LSTMCell(RNNCellBase):
    """One LSTM step (one fused cell kernel after the two GEMMs); forward(input, (h, c)) returns (h', c').
    ``LSTMCell(input_size, hidden_size, bias=True, device=None, dtype=None)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        self._prep(input, hx)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        return torch.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class GRUCell(RNNCellBase):
    """One GRU step (one fused cell kernel after the two GEMMs); forward(input, h) returns h'.
    ``GRUCell(input_size, hidden_size, bias=True, device=None, dtype=None)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        self._prep(input, hx)
        hx = self._zeros(input) if hx is None else hx
        return torch.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
