"""The `token_mask` slot: which response tokens the update trains on."""
from workbench.masks import token_masks  # noqa: F401  (registration at import)
from workbench.masks.token_masks import high_entropy_mask, min_abs_advantage, overlong_filter

__all__ = ["high_entropy_mask", "min_abs_advantage", "overlong_filter"]
