"""Dagster definitions, merged from the per-service asset modules.

The pull assets arrive with the pull pipeline (issue 3); until then the code location loads
and holds nothing, so `workspace.yaml` and `make dev` have something valid to point at.
"""

import dagster as dg

defs = dg.Definitions()
