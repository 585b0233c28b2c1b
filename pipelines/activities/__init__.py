"""Comment automation activities as code: a folder of TOML files (declared.py), what the
service holds and the apply log (state.py), the plan and its apply (plan.py).
docs/activities.md says how to use it."""

from pipelines.activities.declared import activities_dir
from pipelines.activities.plan import Outcome, Refused, apply_activities, plan_activities
from pipelines.activities.state import CHANGES

__all__ = [
    "CHANGES",
    "Outcome",
    "Refused",
    "activities_dir",
    "apply_activities",
    "plan_activities",
]
