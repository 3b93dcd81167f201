"""PyTorch's ``torch.random``: the default generator's seeding and state (one Philox generator serves every
device here)."""
from .ops.random import (manual_seed, seed, initial_seed, get_rng_state, set_rng_state, fork_rng,  # noqa: F401
                         default_generator)

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"]
