"""SLURM: SBATCH rendering and static validation (render, validate); the client talks to SLURM."""
