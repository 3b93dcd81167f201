"""Parametrization forms of weight and spectral normalization (PyTorch's ``torch.nn.utils.parametrizations``),
built on :mod:`cltorch.nn.utils.parametrize`. State-dict keys are PyTorch's:
``parametrizations.weight.original0`` (g) / ``original1`` (v) for weight_norm; ``parametrizations.weight.original``
and ``parametrizations.weight.0._u`` / ``._v`` for spectral_norm; ``parametrizations.weight.original`` and (with
``use_trivialization``) ``parametrizations.weight.0.base`` for orthogonal."""
import cltorch as torch
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """``module.<name>`` becomes ``original1 * (original0 / ||original1||)``, the norm over every dim but ``dim``
    (``None``: the whole tensor). Returns ``module``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if ndim > 1:
            with torch.no_grad():
                weight_mat = self._reshape_weight_to_matrix(weight)
                h, w = weight_mat.shape
                u = F.normalize(torch.randn(h, device=weight.device, dtype=weight.dtype), dim=0, eps=self.eps)
                v = F.normalize(torch.randn(w, device=weight.device, dtype=weight.dtype), dim=0, eps=self.eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with torch.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(torch.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(torch.mv(weight_mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = torch.vdot(u, torch.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """``module.<name>`` becomes ``original / sigma`` (sigma: the largest singular value, by power iteration on the
    buffers ``_u``/``_v``, updated in training mode). ``dim`` defaults to 1 for ConvTranspose layers, else 0.
    Returns ``module``. Raises ValueError when ``module`` has no parameter or buffer ``name``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, torch.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---------------------------------------------------------------------------------------------- orthogonal
_ORTH_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(Q):
    """Q^H Q = I to 10 * n * eps (Q tall, ``(..., n, k)``)."""
    n, k = Q.size(-2), Q.size(-1)
    eye = torch.eye(k, dtype=Q.dtype, device=Q.device)
    return torch.allclose(Q.mH @ Q, eye, atol=10.0 * n * torch.finfo(Q.dtype).eps)


def _make_orthogonal(A):
    """The Q of A = QR (A tall) with the signs chosen so that diag(R) is non-negative."""
    X, tau = torch.geqrf(A)
    Q = torch.linalg.householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    """Maps an unconstrained tensor ``(..., n, k)`` to one with orthonormal columns (rows when n < k).

    matrix_exp / cayley: the lower triangle of the (transposed-to-tall) tensor, padded to a square n x n matrix,
    gives the skew matrix A = L - L^H; Q = exp(A) or the Cayley map (I - A/2)^-1 (I + A/2), cut to its first k
    columns. householder: the strictly lower triangle holds Householder vectors v_i (unit first entry implied)
    with tau_i = 2 / (1 + |v_i|^2), Q = H_1 ... H_k, and the diagonal's signs (+-1) flip Q's columns. With
    ``use_trivialization`` (the buffer ``base``), Q is multiplied onto ``base``, the orthogonal matrix assigned
    last, and assigning stores -I (whose image is the identity) as the original (Lezcano-Casado 2019,
    "Trivializations for gradient-based optimization on manifolds")."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        wide = n < k
        if wide:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = torch.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == "matrix_exp":
                Q = torch.matrix_exp(A)
            else:
                eye = torch.eye(n, dtype=A.dtype, device=A.device)
                Q = torch.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            V = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (V * V).sum(dim=-2))
            Q = torch.linalg.householder_product(V, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)   # +-1, no gradient through the signs
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if wide else Q

    def right_inverse(self, Q):
        with torch.no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of "
                                 f"shape {Q.shape}.")
            Q_in = Q
            n, k = Q.size(-2), Q.size(-1)
            wide = n < k
            if wide:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the "
                                              "Cayley parametrizations when use_trivialization=False.")
                A, tau = torch.geqrf(Q)
                d = A.diagonal(dim1=-2, dim2=-1)
                signs = d.sign()
                signs = torch.where(tau == 0.0, -signs, signs)   # LAPACK skipped that reflection: flip back
                d.copy_(signs)
                return A.mT if wide else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                extra = torch.randn(*(Q.size()[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(torch.cat([Q, extra], dim=-1))
            self.base = Q
            neg_eye = torch.zeros_like(Q_in)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """``module.<name>`` (a matrix or batch of matrices, ``(..., n, k)``) becomes orthogonal: orthonormal columns
    when n >= k, orthonormal rows otherwise (unitary for complex tensors).

    ``orthogonal_map``: ``"matrix_exp"``, ``"cayley"`` or ``"householder"``; default matrix_exp for square or
    complex tensors, householder otherwise. ``use_trivialization`` (default True) keeps the buffer
    ``parametrizations.<name>.0.base`` (initialised from the current tensor, made orthogonal by QR when it is not)
    and parametrizes the offset from it. Returns ``module``.

    Raises ValueError when ``module`` has no tensor ``name``, it has fewer than 2 dims, the map is unknown, or
    householder is asked for a complex tensor; assigning a tensor of another shape raises ValueError; assigning
    with matrix_exp / cayley and ``use_trivialization=False`` raises NotImplementedError (as PyTorch).
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, torch.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.size(-2) == weight.size(-1) or weight.is_complex()
                          else "householder")
    if orthogonal_map not in _ORTH_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
