"""``torch.linalg``: factorizations and solves (``cltorch/ops/lapack.py``), norms and products
(``_products.py``)."""
from ._products import *  # noqa: F401,F403


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a factorization failed (singular or not positive-definite input)."""
