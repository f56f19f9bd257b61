"""The analysis of a triage run: per-cell aggregation, statistics, confound labels, findings.

Pure functions over trial records; nothing here runs a trial or writes a file.
"""
