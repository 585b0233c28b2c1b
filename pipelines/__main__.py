"""`python -m pipelines …`, the command's name before the command line became a layer of its
own (`cli/`): kept so that a crontab written for it runs on. It imports nothing of the
product: the process becomes `python -m cli` with the same arguments."""

import os
import sys

os.execv(sys.executable, [sys.executable, "-m", "cli", *sys.argv[1:]])
