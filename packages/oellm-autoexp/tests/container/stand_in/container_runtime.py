"""Stand-in for `apptainer` / `singularity` (boundary fake for the container-runner tests).

Installed under the runtime's name first on PATH. It records its argv (JSON lines in
$STANDIN_LOG), accepts only the `exec` syntax the real runtimes accept (`--bind/-B SRC[:DST]`,
`--env NAME=VALUE`, `--pwd DIR` and a few flags), refuses a missing image or bind source as the
real ones do, then runs the command locally: in the `--pwd` directory, with the `--env` values
and `APPTAINER_CONTAINER` / `SINGULARITY_CONTAINER` set as inside a real container, and with
its own directory (where the stand-in `sbatch` lives) removed from PATH, because a training
image has no SLURM commands. Its exit code is the command's.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

FLAGS = {"--cleanenv", "--nv", "--rocm", "--contain", "--writable-tmpfs"}


def fatal(message: str) -> NoReturn:
    print(f"FATAL:   {message}", file=sys.stderr)
    sys.exit(255)


def main() -> None:
    tool = Path(sys.argv[0]).name
    args = sys.argv[1:]
    with Path(os.environ["STANDIN_LOG"]).open("a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "argv": args}) + "\n")
    if not args or args[0] != "exec":
        fatal(f"unknown command {args[:1]}")
    i = 1
    binds: list[str] = []
    env: dict[str, str] = {}
    pwd: str | None = None
    while i < len(args) and args[i].startswith("-"):
        opt = args[i]
        if opt in ("--bind", "-B", "--env", "--pwd"):
            if i + 1 >= len(args):
                fatal(f"option {opt} needs a value")
            value = args[i + 1]
            if opt == "--pwd":
                pwd = value
            elif opt == "--env":
                name, sep, val = value.partition("=")
                if not sep:
                    fatal(f"--env {value}: expected NAME=VALUE")
                env[name] = val
            else:
                binds.append(value)
            i += 2
        elif opt in FLAGS:
            i += 1
        else:
            fatal(f"unknown flag: {opt}")
    if i >= len(args):
        fatal("no image given")
    image, command = args[i], args[i + 1 :]
    if not Path(image).is_file():
        fatal(f"could not open image {image}: failed to retrieve path")
    for bind in binds:
        source = bind.split(":")[0]
        if not Path(source).exists():
            fatal(f"container creation failed: mount {source}: no such file or directory")
    if not command:
        fatal("no command given")
    here = str(Path(sys.argv[0]).resolve().parent)
    child = dict(os.environ)
    child.update(env)
    child[f"{tool.upper()}_CONTAINER"] = image
    child["PATH"] = os.pathsep.join(p for p in child.get("PATH", "").split(os.pathsep) if p != here)
    try:
        done = subprocess.run(command, cwd=pwd, env=child, check=False)
    except FileNotFoundError:
        fatal(f"{command[0]}: executable file not found in $PATH")
    sys.exit(done.returncode)


main()
