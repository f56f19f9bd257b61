"""Running a triage matrix: the run directory, its manifest, the executors, the schedule."""
