from pipelines.push.validation.dispatch import RECORD_TYPES, validate_record, view_columns
from pipelines.push.validation.fields import Problem, moment
from pipelines.push.validation.members import validate_import_row
from pipelines.push.validation.profiles import validate_profile_update

__all__ = [
    "RECORD_TYPES",
    "Problem",
    "moment",
    "validate_import_row",
    "validate_profile_update",
    "validate_record",
    "view_columns",
]
