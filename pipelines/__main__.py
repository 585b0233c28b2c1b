"""`python -m pipelines …`: the command line (`assets/cli.py`). This launcher is the one file
of `pipelines/` that reaches the Dagster layer: nothing imports it, it only starts the
command, whose runs go through the same Dagster assets and jobs as the UI's."""

import sys

from assets.cli import main

sys.exit(main())
