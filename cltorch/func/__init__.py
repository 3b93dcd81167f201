"""PyTorch's ``torch.func`` (functorch's composable transforms) on cltorch's reverse-mode autograd.

- ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``: reverse passes of ``cltorch.autograd.grad``; they nest
  (``grad(grad(f))``, MAML) because inner transforms keep the graph when an outer one is running.
- ``jvp``, ``linearize``: exact, by the double-vjp trick (no forward-mode AD here); ``jacfwd`` gives the same
  Jacobian as ``jacrev`` (computed in reverse mode); ``hessian = jacfwd(jacrev(f))``.
- ``vmap``: runs the function once per sample and stacks the results (PyTorch's values and argument handling,
  not its speed); ``randomness`` 'error' / 'different' / 'same' honoured.
- ``functional_call``, ``stack_module_state``, ``replace_all_batch_norm_modules_``; ``functionalize`` and
  ``debug_unwrap`` return their argument (eager execution has nothing to rewrite or unwrap).
See each function's docstring for shapes, structures and errors.
"""
from ._eager import grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian
from ._vmap import vmap
from ._module import (functional_call, stack_module_state, replace_all_batch_norm_modules_, functionalize,
                      debug_unwrap)

__all__ = ["grad", "grad_and_value", "vmap", "replace_all_batch_norm_modules_", "functionalize", "hessian", "jacfwd",
           "jacrev", "jvp", "linearize", "vjp", "functional_call", "stack_module_state", "debug_unwrap"]
