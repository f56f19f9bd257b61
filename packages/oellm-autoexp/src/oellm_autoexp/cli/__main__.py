"""`python -m oellm_autoexp.cli ...`: the same as the `oellm-autoexp` console script."""

import sys

from oellm_autoexp.cli.main import console_main

sys.exit(console_main())
