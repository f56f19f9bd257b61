"""The `oellm-autoexp` command line: thin click parsers over the library (`oellm_autoexp.api`).

`main.py` holds the group, `plan` and `submit`; `monitor.py` the execution commands (`monitor`,
`status`, `cleanup`). Nothing here decides anything a library caller would need.
"""

from oellm_autoexp.cli.main import cli, console_main, main

__all__ = ["cli", "console_main", "main"]
