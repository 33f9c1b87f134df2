"""Per-attempt seeds: distinct for every (subsample, attempt), the same on every run."""

from __future__ import annotations

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def derive_seed(seed: int, subsample_index: int, attempt: int) -> int:
    """The seed of one attempt, derived from the call's ``seed`` (fits in 31 bits)."""
    mixed = _splitmix64(_splitmix64(_splitmix64(seed & _MASK64) ^ subsample_index) ^ attempt)
    return mixed & 0x7FFFFFFF
