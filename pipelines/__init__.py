"""The pull pipeline (and, later, push and webhooks): clients, lake, warehouse, Dagster."""

import warnings

import dagster as dg

# Dagster's notes that single-run backfills are beta and freshness checks superseded (by
# FreshnessPolicy, itself still a preview) are for this code's authors, who chose both on
# purpose; the people running a sync should not see them on every start.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.SupersessionWarning)
