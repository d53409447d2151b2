"""API route for "where compaction hurt" over every stored session of the user (``services.hurt``)."""

from django.http import HttpRequest
from ninja import Field, Router, Schema

from hermes_web.schemas import ErrorOut
from hermes_web.services.hurt import hurt_report

router = Router(tags=["hurt"])


class GroupOut(Schema):
    name: str = Field(description="the agent (session source) or the recorded working directory")
    sessions: int
    compactions: int
    per_session: float | None
    peak_hour: str = Field(description="its busiest clock hour (UTC), 'YYYY-MM-DD HH:00'")
    peak_hour_count: int
    native: int = Field(description="how many were the agent's own compactions")
    compaction_ids: list[str] = Field(description="the newest few, oldest first")


class ItemOut(Schema):
    session: str = Field(description="the conversation's public id")
    session_title: str
    compactions: list[str] = Field(description="the compactions behind the finding, oldest first")
    value: float = Field(
        description="loops: quick compactions; freed: share freed; growth: worst ratio; "
        "miscount: recorded tokens-before; rules: rules lost; re-reads: tokens"
    )
    detail: str


class HourOut(Schema):
    hour: str
    compactions: int
    compaction_ids: list[str]


class HurtOut(Schema):
    sessions: int
    compactions: int
    hours: list[HourOut] = Field(description="the newest hours that had compactions")
    by_agent: list[GroupOut]
    by_project: list[GroupOut]
    quick: int = Field(description="compactions within a few replies of the previous one")
    loop_chains: int = Field(description="chains with repeated quick compactions")
    loops: list[ItemOut] = Field(description="the chains with the most, at most 50")
    freed_little_count: int
    freed_little: list[ItemOut] = Field(description="those that freed least, at most 50")
    ratios: int = Field(description="successive summary pairs compared")
    grown: int = Field(description="of them, summaries that grew")
    median_ratio: float | None
    max_ratio: float | None
    growth: list[ItemOut] = Field(description="the chains whose summaries grew most")
    miscount_count: int
    miscounts: list[ItemOut] = Field(description="the highest recorded counts, at most 50")
    deep_checked: int = Field(description="newest compactions checked for rules lost and re-reads")
    rules_lost: list[ItemOut]
    rereads: list[ItemOut]
    reread_tokens: int


@router.get("/hurt", response={200: HurtOut, 401: ErrorOut})
def where_it_hurt(request: HttpRequest) -> dict:
    """Loops, summary growth, trigger miscounts, rules lost and re-reads across all your sessions."""
    data = hurt_report(request.user).to_dict()
    data["hours"] = [
        {"hour": hour, "compactions": n, "compaction_ids": ids} for hour, n, ids in data["hours"]
    ]
    return data
