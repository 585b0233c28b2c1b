"""The Dagster layer: the assets, checks, jobs, schedules and sensors made from the core in
`pipelines/`, the resources they are configured with, and the command line that runs them."""

import warnings

import dagster as dg

# Dagster's notes that single-run backfills are beta and freshness checks superseded (by
# FreshnessPolicy, itself still a preview) are for this code's authors, who chose both on
# purpose; the people running a sync should not see them on every start.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.SupersessionWarning)
# So is partitioning a check by day (a preview of Dagster 1.13: `assets/checks.py` says why,
# and tests/pipelines/test_factory.py what it is relied on for); Dagster's other previews
# still warn.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)
