"""statkit: tiny statistics helpers (the example repository with a bug)."""

from statkit.stats import mean, median

__all__ = ["mean", "median"]
