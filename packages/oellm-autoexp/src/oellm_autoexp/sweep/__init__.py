"""Sweep expansion (Hydra-like product / list), deterministic job ids, sweep.json."""
