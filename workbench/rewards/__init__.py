"""Reward functions and reward-shaping transforms (`fn(rewards, lengths, **hp) -> rewards`)."""
from workbench.rewards import shaping  # noqa: F401  (registration)
