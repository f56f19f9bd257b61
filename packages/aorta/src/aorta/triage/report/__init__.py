"""The report of a triage run: matrix.json / matrix.md / matrix.png, and progress events."""
