"""Floor 5: one module per op family. Importing this package registers every op and Tensor method."""
from . import elementwise, reduction, pointwise, reductions, views, creation, getitem, softmax, norms, losses, attention  # noqa: F401
from . import random, indexing, linalg, joins, sortscan, conv, pool, padding  # noqa: F401
from . import activations  # noqa: F401
from . import rnn  # noqa: F401
from . import special_math, compare, shape_ops, statistics  # noqa: F401
from . import complex  # noqa: F401,E402  (after shape_ops: its real/imag/conj serve complex tensors too)
from . import lapack, lapack_api  # noqa: F401
from . import aten_extras, aten  # noqa: F401  (issue 15: less common torch.* functions; torch.ops.aten names)
from . import tensor_methods_extra  # noqa: F401  (the Tensor methods PyTorch has that the modules above lack)
from . import _autocast  # noqa: F401,E402  (last: wraps the public functions named in _dispatch.AUTOCAST_OPS)
