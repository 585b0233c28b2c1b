"""The Dagster layer: the assets, checks, jobs, schedules and sensors made from the core in
`pipelines/`, the resources they are configured with, and the command line that runs them.
Importing the package imports no Dagster: the command line's sync and activities run
without it (`cli/main.py`)."""

import warnings

# Dagster's notes that single-run backfills are beta and freshness checks superseded (by
# FreshnessPolicy, itself still a preview) are for this code's authors, who chose both on
# purpose; the people running a sync should not see them on every start. Told apart by their
# words, so that this filter needs no import of Dagster.
warnings.filterwarnings("ignore", message=r".* is currently in beta")
warnings.filterwarnings("ignore", message=r".* is superseded and its usage is discouraged")
# So is partitioning a check by day (a preview of Dagster 1.13: `assets/checks.py` says why,
# and tests/pipelines/test_factory.py what it is relied on for); Dagster's other previews
# still warn.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec")
