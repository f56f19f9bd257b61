"""The in-tree workload: real PyTorch FSDP2 training of a small transformer LM."""
