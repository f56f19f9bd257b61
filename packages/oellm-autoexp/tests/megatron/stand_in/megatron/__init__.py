"""Stand-in for Megatron-LM's package root (test fixture; see training/arguments.py)."""
