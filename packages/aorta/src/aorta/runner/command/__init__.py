"""Command workloads: the user's own training command as a trial (issue 13).

One trial is one fresh process group running an argv (never a shell). Its output is streamed
to `trial_<id>.log` and scanned as it arrives for failure and error patterns and for step
lines; a per-trial timeout and a hang detector end it; the whole group is stopped afterwards.

* `spec`      the validated settings of a command workload (`CommandSpec`) and its argv.
* `flags`     the same settings as command-line flags (`--step-time`, `--keep-logs`, ...).
* `patterns`  the default failure / error patterns.
* `steps`     step-time presets and parsers (megatron, hf, jsonl, a regex, a marker).
* `clocks`    what times the step lines (`clock: auto | log | arrival | cpu`).
* `cpu_clock` CPU time of a trial's process tree (`clock: cpu`).
* `scanner`   bounded, chunked scanning of the output stream.
* `process`   process-group start, stop and membership.
* `trial`     one trial end to end, and how its outcome is decided.
"""
