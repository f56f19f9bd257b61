"""Stand-in for `sbatch` on the host (boundary fake for the container-runner tests).

Records its argv and whether it runs inside a container (JSON lines in $STANDIN_LOG). With
`--parsable` it prints a job id (1001, 1002, ... counted in $STANDIN_LOG.count) like the real
one; the call number in $STANDIN_SBATCH_FAIL_AT fails with SLURM's message instead. A script
path that does not exist fails as the real sbatch does.
"""

import json
import os
import sys
from pathlib import Path

log_path = Path(os.environ["STANDIN_LOG"])
args = sys.argv[1:]
inside = any(k in os.environ for k in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"))
with log_path.open("a", encoding="utf-8") as log:
    log.write(json.dumps({"tool": "sbatch", "argv": args, "in_container": inside}) + "\n")
if "--test-only" in args:
    print("sbatch: Job 1 to start at 2026-01-01T00:00:00", file=sys.stderr)
    sys.exit(0)
count_path = log_path.with_name(log_path.name + ".count")
count = 1
if count_path.exists():
    count = int(count_path.read_text(encoding="utf-8")) + 1
count_path.write_text(str(count), encoding="utf-8")
if os.environ.get("STANDIN_SBATCH_FAIL_AT") == str(count):
    print("sbatch: error: Batch job submission failed: Invalid account", file=sys.stderr)
    sys.exit(1)
if not args or not Path(args[-1]).is_file():
    print(f"sbatch: error: Unable to open file {args[-1] if args else ''}", file=sys.stderr)
    sys.exit(1)
print(1000 + count)
