"""Member imports: the keys a row may be matched on (`IMPORT_KEYS`), an import row's fields
(the profile fields of pipelines/push/validation/profiles.py and `line_uid`) and
`validate_import_row`.
"""

from collections.abc import Mapping
from typing import Any

from pipelines.push.validation.fields import Problem, max_text, validated
from pipelines.push.validation.profiles import ProfileFields

IMPORT_KEYS = ("line_uid", "display_email", "display_mobile", "connect_id", "customer_id")


# -- imports ------------------------------------------------------------------------------


class ImportRow(ProfileFields):
    line_uid: max_text() = None


# -- the interface ------------------------------------------------------------------------------


def validate_import_row(
    row: Mapping[str, Any], import_key: str
) -> tuple[dict | None, list[Problem]]:
    """One object of an import's `data`; it must carry a value for `import_key`."""
    if import_key not in IMPORT_KEYS:
        return None, [Problem("import_key", f"must be one of {', '.join(IMPORT_KEYS)}")]
    body, problems = validated(ImportRow, row)
    if row.get(import_key) in (None, ""):
        problems.append(Problem(import_key, "is the import key, so every row needs a value"))
    return (None, problems) if problems else (body, [])
