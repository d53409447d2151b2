"""Compaction that a client asks for through a provider's own API (OpenAI's
``/v1/responses/compact``, ``compaction_trigger``, ``context_management``), run by our engine.

The conversation is stored as any request's is (the one conversation service), compacted at
once by ``request_compaction`` (a committed compaction, in the inspector like any other), and
handed back as a ``compaction`` item whose ``encrypted_content`` is a sealed reference to
that stored compaction: AES-256-GCM (authenticated encryption, key derived from the server's
SECRET_KEY with HKDF), bound to the key's owner, so a client can neither read, forge nor
reuse another user's; an altered or foreign item is refused (400), never decoded. Sent back in a later ``input``, the item stands for everything
before it: the model receives the compaction's head + summary + tail and what follows.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core import signing

from hermes_web.models import ApiKey, Compaction, Message
from hermes_web.openai_compat import service
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.validation import ChatRequest
from hermes_web.services.compactions import (
    CompactionBusy,
    CompactionRefused,
    request_compaction,
    run_compaction,
)

SALT = "hermes-web.v1.compaction-item"
# The sealed form: version tag, then base64url(nonce || AES-256-GCM ciphertext and tag).
SEAL_PREFIX = "hwc1."
NONCE_BYTES = 12
TAG_BYTES = 16
SEALED_CHARS_MAX = 4_096  # ours are ~80 characters; anything far longer is not one


@functools.lru_cache(maxsize=8)
def _sealing_key(secret: str) -> AESGCM:
    """The AES-256-GCM key for compaction items, derived from a Django secret with HKDF (its
    own ``info``: the secret's other uses, sessions and signing, never share this key)."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SALT.encode())
    return AESGCM(derived.derive(secret.encode("utf-8", "surrogatepass")))


def _bound_to(owner_id: int) -> bytes:
    # Associated data: authenticated, not stored in the blob. An item opened with another
    # owner's id fails its tag exactly like an altered one.
    return f"{SALT}:owner={owner_id}".encode()


def seal(compaction: Compaction, owner_id: int) -> str:
    """The item's ``encrypted_content``: which compaction, encrypted and authenticated with
    AES-256-GCM (key from the server's SECRET_KEY by HKDF, the owner bound in as associated
    data). It names the stored compaction only (its summary never travels in it)."""
    nonce = os.urandom(NONCE_BYTES)
    plain = json.dumps({"c": compaction.public_id}).encode()
    sealed = _sealing_key(settings.SECRET_KEY).encrypt(nonce, plain, _bound_to(owner_id))
    return SEAL_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


def item(compaction: Compaction, owner_id: int) -> dict:
    """The Responses ``compaction`` item for a committed compaction."""
    return {
        "type": "compaction",
        "id": f"cmp_{compaction.public_id}",
        "encrypted_content": seal(compaction, owner_id),
        "created_by": "hermes-web",
    }


def _opened(token: str, owner_id: int) -> dict | None:
    """The sealed payload when ``token`` authenticates under the current secret (or one of
    SECRET_KEY_FALLBACKS, while keys rotate) for this owner; None otherwise. Nothing of an
    unauthenticated blob is ever parsed."""
    if not token.startswith(SEAL_PREFIX) or len(token) > SEALED_CHARS_MAX:
        return None
    body = token[len(SEAL_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < NONCE_BYTES + TAG_BYTES:
        return None
    nonce, sealed = raw[:NONCE_BYTES], raw[NONCE_BYTES:]
    for secret in [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]:
        try:
            plain = _sealing_key(secret).decrypt(nonce, sealed, _bound_to(owner_id))
        except InvalidTag:
            continue
        data = json.loads(plain)  # authentic: we wrote it
        return data if isinstance(data, dict) else None
    return None


def unseal(token: object, owner_id: int, where: str) -> Compaction:
    """The committed compaction an item names; ApiError 400 when the item was altered, was
    sealed by another server (another SECRET_KEY) or for someone else, or its compaction is
    gone or undone."""
    if not isinstance(token, str):
        raise ApiError(
            400,
            f"{where}.encrypted_content: must be a string.",
            code="invalid_type",
            param=f"{where}.encrypted_content",
        )
    data = _opened(token, owner_id)
    if data is None:
        raise ApiError(
            400,
            f"{where}.encrypted_content: this compaction item could not be opened (altered, "
            "or not sealed by this server for this API key's user); send it back exactly as "
            "it was returned, or send the conversation without it.",
            code="invalid_encrypted_content",
            param=f"{where}.encrypted_content",
        )
    compaction = Compaction.objects.filter(
        public_id=data.get("c"), session__owner_id=owner_id, status=Compaction.Status.COMMITTED
    ).first()
    if compaction is None:
        raise ApiError(
            400,
            f"{where}: the compaction this item names is no longer committed (undone or "
            "deleted); send the conversation without it.",
            code="compaction_not_found",
            param=f"{where}.encrypted_content",
        )
    return compaction


def history_of(compaction: Compaction) -> list[dict]:
    """The messages a compaction replaced, as the client held them: what an item stands for
    (the conversation service then finds the session and sends its compacted context)."""
    rows = compaction.input_rows().values_list(*Message.ENGINE_COLUMNS)
    return [Message.engine_dict(*row) for row in rows]


def context_of(compaction: Compaction) -> list[dict]:
    """The context a committed compaction left (head + summary + tail), as the model reads
    it before what follows."""
    rows = compaction.final_rows(CONTEXT_ROWS_MAX).values_list(*Message.ENGINE_COLUMNS)
    return [Message.engine_dict(*row) for row in rows]


def rendered(chat: ChatRequest) -> list[dict]:
    """What the model will read of a request, for a threshold: after a compaction item or
    block sent back, that compaction's context and what follows it (the history it stands
    for is there for matching only)."""
    compaction = chat.extra.get("compaction")
    if not isinstance(compaction, Compaction):
        return chat.messages
    return context_of(compaction) + chat.messages[chat.extra.get("compaction_covers") or 0 :]


# A compacted context holds a head, one summary and a tail: far fewer rows than this.
CONTEXT_ROWS_MAX = 100_000


def asked_by(key: ApiKey, user_agent: str, protocol: str, endpoint: str, asked_with: str) -> dict:
    """Who asked for a compaction through an API (``Compaction.asked_by``): the protocol,
    endpoint and parameter, the API key's name and the client (its User-Agent's name)."""
    return {
        "protocol": protocol,
        "endpoint": endpoint,
        "asked_with": asked_with,
        "key": key.name,
        "client": service.client_name_from(user_agent),
    }


def compact_conversation(
    key: ApiKey,
    chat: ChatRequest,
    *,
    asked: tuple[str, str, str],
    instructions: str = "",
    user_agent: str = "",
) -> Compaction:
    """Store the conversation (a continued session takes only what is new) and compact it now
    with our engine; the committed compaction, or ApiError (nothing compacted: 400 when the
    conversation is too short, 409 when it cannot be compacted now). ``asked``: protocol,
    endpoint and what in the request asked (recorded as the compaction's ``asked_by``)."""
    prepared = service.prepare(key, chat, user_agent=user_agent)
    session, _ = service.store(prepared, None)
    try:
        run = request_compaction(
            session=session,
            trigger=Compaction.Trigger.MANUAL,
            focus=instructions,
            run_now=True,
            asked_by=asked_by(key, user_agent, *asked),
        )
    except CompactionBusy as busy:
        if busy.running is None or busy.running.status != Compaction.Status.QUEUED:
            raise ApiError(
                409, str(busy), type="invalid_request_error", code="compaction_in_progress"
            ) from None
        run = run_compaction(busy.running.pk)  # an automatic run was waiting: it is this one
    except CompactionRefused as refused:
        raise ApiError(
            409, str(refused), type="invalid_request_error", code="compaction_refused"
        ) from None
    if run.status != Compaction.Status.COMMITTED:
        raise ApiError(
            400,
            f"Nothing was compacted ({run.reason or run.status}): the conversation is too "
            "short to summarize anything.",
            code="compaction_nothing_to_summarize",
        )
    return run


def usage(compaction: Compaction) -> dict:
    """What the compaction pass read and wrote, in Responses usage fields (the summary's
    tokens are its output)."""
    report = compaction.report or {}
    tokens = report.get("tokens") or {}
    read = int(compaction.tokens_before or 0)
    written = int(tokens.get("summary") or 0)
    return {
        "input_tokens": read,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": written,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": read + written,
    }


# -- Anthropic's signed compaction block (on-demand compaction, beta compact-2026-09-04) ------

BLOCK_SALT = "hermes-web.v1.compaction-block"


def summary_of(compaction: Compaction) -> str:
    """The summary our engine wrote for ``compaction`` (the block's ``content``)."""
    return str((compaction.report or {}).get("summary") or "")


def _digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def block(compaction: Compaction, owner_id: int) -> dict:
    """The ``compaction`` content block: our summary, signed with the server's secret and
    bound to the compaction, its owner and the exact content."""
    content = summary_of(compaction)
    signature = signing.dumps(
        {"c": compaction.public_id, "o": owner_id, "h": _digest(content)},
        salt=BLOCK_SALT,
        compress=True,
    )
    return {"type": "compaction", "content": content, "signature": signature}


def _block_error(message: str, code: str, where: str) -> ApiError:
    return ApiError(400, message, code=code, param=where)


def open_block(value: dict, owner_id: int, where: str) -> Compaction:
    """The committed compaction a block sent back names; ApiError 400 (Anthropic's
    ``compaction_signature_invalid`` / ``compaction_content_mismatch``) when it does not
    verify."""
    try:
        data = signing.loads(str(value.get("signature") or ""), salt=BLOCK_SALT)
    except signing.BadSignature:
        data = None
    if not isinstance(data, dict) or data.get("o") != owner_id:
        raise _block_error(
            f"{where}.signature: the compaction block's signature does not verify (altered, "
            "or not made by this server for this API key's user).",
            "compaction_signature_invalid",
            where,
        )
    content = value.get("content")
    if not isinstance(content, str) or _digest(content) != data.get("h"):
        raise _block_error(
            f"{where}.content differs from the text its signature recorded: send the block "
            "back exactly as it was returned.",
            "compaction_content_mismatch",
            where,
        )
    compaction = Compaction.objects.filter(
        public_id=data.get("c"), session__owner_id=owner_id, status=Compaction.Status.COMMITTED
    ).first()
    if compaction is None:
        raise _block_error(
            f"{where}: the compaction this block names is no longer committed (undone or "
            "deleted); send the conversation without it.",
            "compaction_not_found",
            where,
        )
    return compaction
