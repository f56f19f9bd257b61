"""Workloads that aorta can run, and the contract between a workload and the runner."""
