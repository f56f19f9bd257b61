"""The `aorta` command line: thin parsers that call library functions."""
