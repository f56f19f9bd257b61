"""Stand-in for megatron.training (test fixture)."""
