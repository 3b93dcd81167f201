"""``cltorch.backends.opt_einsum``: whether ``cltorch.einsum`` orders its contractions with the ``opt_einsum``
package. It does not: ``einsum`` contracts the operands left to right, so ``is_available()`` is False whether or
not the package is installed. ``enabled`` and ``strategy`` are accepted, kept and change nothing."""
__all__ = ["is_available", "get_opt_einsum", "enabled", "strategy"]

enabled = False
strategy = None


def is_available():
    """False: cltorch.einsum does not use opt_einsum."""
    return False


def get_opt_einsum():
    """None: the package is not used."""
    return None
