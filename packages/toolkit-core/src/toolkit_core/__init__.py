"""Foundations shared by aorta, triton-invariance and oellm-autoexp (one implementation each).

Modules: `errors` (error base, `ExitCode`, `UnknownNameError`), `atomic` (durable, atomic
writes), `paths` (symlink-safe directories, bounded reads of regular files), `yaml_safe`
(hardened YAML loading), `timestamps`, `cli` (`run_cli`). Nothing here imports more than the
standard library and click, so every command's start-up stays cheap.
"""

__version__ = "0.1.0"
