"""Request and response models of the contacts side of the data hub (spec sections 2 and 4).

Requests mirror the spec's rules; unknown keys are refused so a misspelt field is a 400
naming it rather than an update that silently does nothing. Custom field values depend on
the region's definitions and are checked in the handler (custom_fields.checked_value).
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from sandbox.encoding import Text

ChannelType = Literal["line", "fb", "ig", "whatsapp", "email", "wccs", "others"]
SUPPORTED_CHANNEL_TYPES = ("line", "fb", "ig", "whatsapp", "wccs")
ImportKey = Literal["line_uid", "display_email", "display_mobile", "connect_id", "customer_id"]
Gender = Literal["male", "female", "unknown", "other"]
Source = Literal["maac", "caac"]
# E.164: "+", then 8 to 15 digits, the first not 0.
E164 = Annotated[str, StringConstraints(pattern=r"^\+[1-9][0-9]{7,14}$")]


def _real_date(text: str) -> str:
    date.fromisoformat(text)  # ValueError (→ 400) for 2026-02-30
    return text


IsoDate = Annotated[
    str, StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), AfterValidator(_real_date)
]


class _Profile(BaseModel):
    """Contact profile fields, each optional and nullable (null clears)."""

    model_config = ConfigDict(extra="forbid")

    customer_id: str | None = None
    connect_id: str | None = None
    full_name: str | None = None
    display_name: str | None = None
    display_email: str | None = None
    display_mobile: E164 | None = None
    gender: Gender | None = None
    birthday: IsoDate | None = None
    region: str | None = None
    city: str | None = None
    address: str | None = None
    company: str | None = None
    member_level: str | None = None


class ProfileData(_Profile):
    """`data` of a profile update: profile fields except export-only ones, plus custom fields."""

    custom_fields: dict[str, Any] | None = Field(
        None, description="keys `cl_custom_<field key>`; value by the field's type; null clears"
    )


class UpdateProfileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel_type: ChannelType = Field(description="supported: line, fb, ig, whatsapp, wccs")
    # 128 chars: the bound the spec gives these ids in submitted records (section 2).
    external_channel_id: Text = Field(min_length=1, max_length=128)
    external_member_id: Text = Field(min_length=1, max_length=128)
    data: ProfileData


class UpdatedFields(BaseModel):
    updated_fields: list[str]


class ImportRow(_Profile):
    line_uid: str | None = None


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    import_key: ImportKey
    data: list[ImportRow] = Field(min_length=1, max_length=10_000)


class ExportRequest(BaseModel):
    """The export takes no options (request shape not shown): an empty object or no body."""

    model_config = ConfigDict(extra="forbid")


class Task(BaseModel):
    id: int
    category: Literal["import_member", "export_member"]
    status: Literal["pending", "processing", "success", "failed"]
    result: dict[str, Any] = Field(
        description="import: {updated_contact_size}; export: {download_url, row_count}"
    )
    created_at: str
    updated_at: str


class Broadcast(BaseModel):
    id: int
    source: Source
    name: str
    sent_date: str
    status: Literal["sent", "scheduled"]
    created_at: str


class BroadcastReport(BaseModel):
    name: str
    source: Source
    sent_date: str
    segment_name: str
    sent: int
    open_count: int
    clicks: int


class CustomFieldOption(BaseModel):
    id: int
    key: str
    name: str
    description: str
    position: int
    active: bool


class CustomField(BaseModel):
    id: int
    name: str
    key: str
    type: Literal["text", "number", "date", "datetime", "single_select"]
    description: str
    slot_number: int
    active: bool
    options: list[CustomFieldOption] | None


class CampaignRequest(BaseModel):
    """Admin: run one simulated campaign now."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["broadcast", "journey"] = "broadcast"
    source: Source = "maac"
