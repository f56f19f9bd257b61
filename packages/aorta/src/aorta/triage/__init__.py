"""Triage matrix: run (mitigation x environment) cells of one workload and flag speed confounds.

`aorta.triage.recipe` holds the recipe schema, its loader (YAML/JSON) and the flag -> recipe
builder; both the recipe mode and the flag mode of `aorta triage run` converge on one `Recipe`.
"""
