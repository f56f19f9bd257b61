"""Print a recorded log exactly as given (standard library only): a stand-in for a framework.

print_log.py FILE   FILE is JSON: a list of [text, seconds]: write `text` byte for byte (no
newline added: a tqdm bar redraws with a leading `\\r`), flush, then sleep `seconds` (so lines
arrive apart, as a training loop prints them).
"""

import json
import sys
import time
from pathlib import Path


def main(path: str) -> int:
    out = sys.stdout.buffer
    for text, seconds in json.loads(Path(path).read_text()):
        out.write(text.encode())
        out.flush()
        if seconds:
            time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
