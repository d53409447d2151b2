"""What-if: the engine on your own parameters as a dry run, a form you can iterate on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction import CompactionConfig, ConfigError
from hermes_web.http import HtmxHttpRequest
from hermes_web.models import Compaction, Session
from hermes_web.presenters.inspector import card_context
from hermes_web.presenters.vocabulary import term
from hermes_web.services.compactions import (
    request_compaction,
)
from hermes_web.views.compactions import _latest_committed, _runs_inline, _session_for

# The summarizer a what-if pre-selects (no model: it runs in the request); the result's
# "changed" marks compare against the same choice.
SUMMARIZER_DEFAULT = "deterministic"


def _shown_defaults(config) -> dict[str, Any]:
    """The defaults the form shows and the result compares against: the engine's settings,
    with the threshold as the share that is used (the hermes profile raises a low one on a
    small window: 50 % becomes 85 % under 512,000 tokens), so the field says what runs."""
    defaults = config.to_dict()
    defaults["threshold_percent"] = config.effective_threshold_percent
    return defaults


WHAT_IF_FIELDS = (
    # (form name, config key, label, kind, help under the field)
    (
        "threshold",
        "threshold_percent",
        "Threshold (% of the context window)",
        "percent",
        "Automatic compaction starts at this share of the window.",
    ),
    (
        "head",
        "protect_first_n",
        "Head: messages kept after the system prompt",
        "int",
        "Kept verbatim at the start; the cut moves past tool results so none is orphaned.",
    ),
    (
        "tail",
        "tail_token_budget",
        "Tail budget (tokens)",
        "int",
        "The newest messages kept verbatim, up to about this many tokens; the latest user "
        "message and reply always stay, even when they alone are bigger.",
    ),
    (
        "fold",
        "fold_min_chars",
        "Fold tool results longer than (chars)",
        "int",
        "Longer tool results in the middle become one line.",
    ),
    (
        "content_max",
        "content_max",
        "Truncate summarizer input over (chars)",
        "int",
        "Only what the summarizer reads is cut; the stored messages stay whole.",
    ),
    (
        "content_head",
        "content_head",
        "… keeping the first (chars)",
        "int",
        "Start kept of a cut message. Start + end must not exceed the limit above.",
    ),
    (
        "content_tail",
        "content_tail",
        "… and the last (chars)",
        "int",
        "End kept of a cut message.",
    ),
)
FIELD_FOR_KEY = {key: name for name, key, *_ in WHAT_IF_FIELDS}
PROFILES = ("classic", "hermes")


def engine_has_profiles() -> bool:
    """Whether the installed engine's CompactionConfig has a ``profile`` field (issue #13)."""
    import dataclasses

    return "profile" in {f.name for f in dataclasses.fields(CompactionConfig)}


def _friendly_config_error(error: ConfigError, overrides: dict, defaults: dict) -> tuple:
    """(form field, message in the form's words) for an engine config error."""
    key = getattr(error, "field", "")
    labels = {name: label for name, _key, label, *_ in WHAT_IF_FIELDS}
    if key in ("content_head", "content_tail", "content_max"):
        used = {
            k: overrides.get(k, defaults[k])
            for k in ("content_head", "content_tail", "content_max")
        }
        return (
            "content_head",
            f"The start kept ({used['content_head']:,}) plus the end kept "
            f"({used['content_tail']:,}) is {used['content_head'] + used['content_tail']:,} "
            f"characters, longer than the truncation limit ({used['content_max']:,}). "
            "Lower one of them or raise the limit.",
        )
    if key == "threshold_percent":
        return "threshold", "Give a percentage above 0 and at most 100."
    name = FIELD_FOR_KEY.get(key)
    if name:
        reason = str(error).split(": ", 1)[-1]
        return name, f"{labels[name]}: {reason}."
    return "form", str(error)


class _Number(forms.Field):
    """A number field of the what-if form that names the label and the raw text it refused."""

    def __init__(self, *, label: str, kind: str, **kwargs: Any) -> None:
        super().__init__(label=label, required=False, **kwargs)
        self.kind = kind

    def to_python(self, value: Any) -> float | int | None:
        raw = str(value if value is not None else "").strip()
        if raw == "":
            return None
        try:
            number: float | int = float(raw) if self.kind == "percent" else int(raw)
        except ValueError:
            wanted = "number" if self.kind == "percent" else "whole number"
            raise forms.ValidationError(f"{self.label}: “{raw}” is not a {wanted}.") from None
        if self.kind == "percent" and not 0 < number <= 100:
            raise forms.ValidationError("Give a percentage above 0 and at most 100.")
        return number


class WhatIfForm(forms.Form):
    """The what-if parameters of one session: a number that differs from the session's
    default overrides its engine setting; the engine's own check runs last, in the form's words.

    ``data`` is the POST, or the GET query of a URL that reproduces an earlier run, or the
    stored parameters of the run being shown; None shows the session's defaults.
    """

    summarizer = forms.CharField(required=False)
    mode = forms.CharField(required=False)
    focus = forms.CharField(required=False)
    profile = forms.CharField(required=False)

    def __init__(self, session: Session, data: Mapping[str, Any] | None = None) -> None:
        from hermes_web.services.compactions import compaction_config_for

        super().__init__(data)
        self.session = session
        self.defaults = _shown_defaults(compaction_config_for(session))
        for name, _key, label, kind, help_text in WHAT_IF_FIELDS:
            self.fields[name] = _Number(label=label, kind=kind, help_text=help_text)
        self.overrides: dict[str, Any] = {}

    def default(self, name: str) -> Any:
        key, kind = next((k, kind) for n, k, _l, kind, _h in WHAT_IF_FIELDS if n == name)
        value = self.defaults[key]
        return round(value * 100, 2) if kind == "percent" else value

    def values(self) -> dict[str, Any]:
        """What the page shows in each field: the text sent, else the session's default."""
        source = self.data if self.is_bound else {}
        values: dict[str, Any] = {}
        for name, *_ in WHAT_IF_FIELDS:
            raw = str(source.get(name, "") or "").strip()
            values[name] = raw or self.default(name)
        values["summarizer"] = source.get("summarizer", SUMMARIZER_DEFAULT) or SUMMARIZER_DEFAULT
        mode = self.session.effective_mode
        values["mode"] = source.get("mode", mode) or mode
        values["focus"] = source.get("focus", "")
        if engine_has_profiles():
            values["profile"] = source.get("profile", "") or self.defaults.get("profile", "hermes")
        return values

    def clean(self) -> dict[str, Any]:
        from hermes_web.services.compactions import compaction_config_for

        cleaned = super().clean() or {}
        for name, key, _label, kind, _help in WHAT_IF_FIELDS:
            number = cleaned.get(name)
            default = self.defaults[key] * 100 if kind == "percent" else self.defaults[key]
            if number is not None and not _same(number, default):
                self.overrides[key] = number / 100 if kind == "percent" else number
        values = self.values()
        if engine_has_profiles():
            default_profile = self.defaults.get("profile", "hermes")
            if values["profile"] not in PROFILES:
                self.add_error("profile", f"Profile: choose {' or '.join(PROFILES)}.")
            elif values["profile"] != default_profile:
                self.overrides["profile"] = values["profile"]
        if values["summarizer"] not in ("auto", "deterministic"):
            self.add_error("summarizer", "Summarizer: choose auto or deterministic.")
        if values["mode"] not in Compaction.Mode.values:
            self.add_error("mode", "Mode: choose rotation or in-place.")
        if not self.errors:
            try:
                compaction_config_for(self.session, self.overrides)
            except ConfigError as error:
                field, message = _friendly_config_error(error, self.overrides, self.defaults)
                self.add_error(None if field == "form" else field, message)
        return cleaned

    def error_messages(self) -> dict[str, str]:
        """The first message per field (``form`` for the form as a whole), in field order."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {
            ("form" if name == NON_FIELD_ERRORS else name): str(messages[0])
            for name, messages in self.errors.items()
        }


def _what_if_form(session: Session, data=None) -> tuple[dict, dict, dict[str, str]]:
    """(values for redisplay, config overrides, errors by field) of the what-if form."""
    form = WhatIfForm(session, data)
    errors = form.error_messages()
    return form.values(), form.overrides, errors


def _values_of_run(run: Compaction) -> dict:
    """The form values that reproduce a stored run."""
    values = {"summarizer": run.summarizer or "deterministic", "mode": run.mode, "focus": run.focus}
    if (run.config or {}).get("profile"):
        values["profile"] = run.config["profile"]
    if values["summarizer"] not in ("auto", "deterministic"):
        values["summarizer"] = "auto"  # the run recorded which model wrote it, not the choice
    try:
        shown = _shown_defaults(CompactionConfig.from_dict(run.config or {}))
    except (ConfigError, TypeError, ValueError):  # a run stored by an older engine
        shown = dict(run.config or {})
    for name, key, _label, kind, _help in WHAT_IF_FIELDS:
        if key in (run.config or {}):
            value = shown.get(key, run.config[key])
            values[name] = round(value * 100, 2) if kind == "percent" else value
    return values


def _query_of(values: dict) -> str:
    return urlencode({k: v for k, v in values.items() if v not in ("", None)})


def threshold_note(session: Session, overrides: dict) -> str:
    """How the threshold in tokens follows from the percentage, the window and the floor, in
    plain steps, and why a lower percentage may change nothing."""
    from hermes_web.services.compactions import compaction_config_for

    try:
        config = compaction_config_for(session, overrides)
    except ConfigError:
        return ""
    window, asked = config.context_length, config.threshold_percent
    percent = config.effective_threshold_percent
    steps = [
        f"{asked * 100:g} % of this conversation's {window:,}-token window is {int(asked * window):,} tokens."
    ]
    if percent != asked:
        steps.append(
            f"The {config.profile} profile never starts below "
            f"{config.threshold_min_percent * 100:g} % of a window under "
            f"{config.threshold_raise_below:,} tokens, so {percent * 100:g} % is used: "
            f"{int(percent * window):,} tokens."
        )
    raw, final = int(percent * window), config.threshold_tokens
    floor = config.min_threshold_tokens
    if floor > raw:
        step = f"The threshold is never below {floor:,} tokens"
        if final < floor:
            step += (
                ", but that would leave no room before this window ends, so it is "
                f"{config.threshold_window_fraction * 100:g} % of the window instead"
            )
        steps.append(step + ".")
    steps.append(f"Threshold: {final:,} tokens.")
    if final >= window:
        steps.append("That is not below the window, so automatic compaction cannot start.")
    if final >= window:
        steps.append("No percentage changes that.")
    elif final != int(asked * window):
        steps.append(
            f"Any percentage below {final / window * 100:.1f} % gives this same threshold, "
            "so lowering it further has no effect."
        )
    return " ".join(steps)


def _same(a: Any, b: Any) -> bool:
    """Two settings are one when they are equal numbers (85 and 85.0000001 from a float)."""
    try:
        return abs(float(a) - float(b)) < 1e-6
    except (TypeError, ValueError):
        return a == b


def parameters_used(session: Session, run: Compaction, asked: str = "") -> list[dict]:
    """Every parameter a run used, its session default, and whether it differed.

    ``asked`` is the summarizer chosen in the form (``auto``/``deterministic``); a finished
    run stores only who wrote the summary, so without it the choice is inferred from that.
    """
    from hermes_web.services.compactions import compaction_config_for

    defaults = _shown_defaults(compaction_config_for(session))
    profile = (run.config or {}).get("profile") or defaults.get("profile", "hermes")
    if asked not in ("auto", "deterministic"):
        asked = _values_of_run(run)["summarizer"]
    try:
        used_config = _shown_defaults(CompactionConfig.from_dict(run.config or {}))
    except (ConfigError, TypeError, ValueError):  # a run stored by an older engine
        used_config = {**defaults, **(run.config or {})}
    rows = []
    for _name, key, label, kind, _help in WHAT_IF_FIELDS:
        used = used_config.get(key, defaults[key])
        shown = (lambda v: f"{v * 100:g} %") if kind == "percent" else (lambda v: f"{v:,}")
        rows.append(
            {
                "label": label,
                "used": shown(used),
                "default": shown(defaults[key]),
                "differs": not _same(used, defaults[key]),
            }
        )
    # Runs store their whole config; of the fields the form does not show, list the changed.
    for key in sorted(set(run.config or {}) - set(FIELD_FOR_KEY) - {"profile"}):
        if run.config[key] != defaults.get(key):
            rows.append(
                {
                    "label": key,
                    "used": run.config[key],
                    "default": defaults.get(key, "—"),
                    "differs": True,
                }
            )
    rows += [
        {
            "label": "Mode",
            "used": term("mode", run.mode),
            "default": term("mode", session.effective_mode),
            "differs": run.mode != session.effective_mode,
        },
        {
            "label": "Engine profile",
            "used": term("profile", profile),
            "default": term("profile", defaults.get("profile", "hermes")),
            "differs": profile != defaults.get("profile", "hermes"),
        },
        {
            "label": "Summarizer asked for",
            "used": term("summarizer", asked),
            "default": term("summarizer", SUMMARIZER_DEFAULT),
            "differs": asked != SUMMARIZER_DEFAULT,
        },
        {
            "label": "Summary written by",
            "used": term("summarizer", run.summarizer) if run.is_finished else "—",
            "default": "—",
            "differs": False,
        },
        {
            "label": "Focus topic",
            "used": run.focus or "—",
            "default": "—",
            "differs": bool(run.focus),
        },
    ]
    return rows


@require_http_methods(["GET", "POST"])
@login_required
def what_if(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    run = None
    if request.GET.get("run"):
        run = (
            Compaction.objects.for_user(request.user)
            .filter(public_id=request.GET["run"], session=session)
            .defer("report")  # card_context reads it only when its cache is cold
            .first()
        )
    reproduce = any(name in request.GET for name, *_ in WHAT_IF_FIELDS) or any(
        name in request.GET for name in ("mode", "profile", "focus")
    )
    data: Mapping[str, Any] | None
    if request.method == "POST":
        data = request.POST
    elif reproduce:
        data = request.GET  # a URL that reproduces a run fills the form in
    elif run is not None:
        data = _values_of_run(run)
    else:
        data = None
    values, overrides, errors = _what_if_form(session, data)
    if request.method == "POST" and not errors:
        try:
            run = request_compaction(
                session=session,
                requested_by=request.user,
                trigger=Compaction.Trigger.WHAT_IF,
                mode=values["mode"],
                focus=values["focus"][:2000],
                config_overrides=overrides,
                summarizer=values["summarizer"],
                run_now=_runs_inline(session, values["summarizer"]),
            )
        except (ConfigError, ValueError) as error:
            errors["form"] = str(error)
        else:
            return redirect(
                f"{reverse('what_if', args=[session.public_id])}?run={run.public_id}"
                f"&{_query_of(values)}"
            )
    if request.method == "POST":
        run = None
    context = {
        "session": session,
        "values": values,
        "fields": [
            {
                "name": name,
                "label": label,
                "kind": kind,
                "value": values[name],
                "help": help_text,
                "error": errors.get(name, ""),
            }
            for name, _key, label, kind, help_text in WHAT_IF_FIELDS
        ],
        "errors": errors,
        "field_errors": [(name, message) for name, message in errors.items() if name != "form"],
        "threshold_note": threshold_note(session, overrides),
        "profiles": PROFILES if engine_has_profiles() else (),
        "run": run,
        "run_ctx": card_context(run) if run else None,
        "run_params": parameters_used(session, run, request.GET.get("summarizer", ""))
        if run
        else None,
        "reproduce_url": f"?{_query_of(values)}",
        "committed": _latest_committed(session),
        "previous": list(
            Compaction.objects.filter(session=session, trigger=Compaction.Trigger.WHAT_IF)
            .defer("report")
            .order_by("-queued_at")[:10]
        ),
        "nav": "conversations",
    }
    committed = context["committed"]
    context["committed_ctx"] = (
        card_context(committed) if isinstance(committed, Compaction) else None
    )
    if request.htmx and request.GET.get("panel") == "run-status":
        return render(request, "hermes_web/what_if.html#run-status", context)
    return render(request, "hermes_web/what_if.html", context, status=400 if errors else 200)
