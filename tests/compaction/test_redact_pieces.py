"""The secret scan reads long text piece by piece: nothing straddling a piece is missed, and the
whole text is never held as UTF-8 at once."""

import tracemalloc

import pytest

from compaction import redact as redact_module
from compaction.redact import redact

PIECE = redact_module._SCAN_PIECE
SECRETS = [
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "DB_PASSWORD=hunter22",
    "Authorization: Bearer abcdef0123456789abcdef0123456789",
]


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("shift", [-20, -15, -14, -8, -3, -1, 0, 1, 3])
def test_a_secret_across_a_piece_boundary_is_redacted(secret: str, shift: int) -> None:
    # Code-listing text (non-ASCII arrow) up to just before, across or after the boundary.
    filler = ("  12→x = 1\n" * (PIECE // 10))[: PIECE + shift]
    text = filler + " " + secret + " tail\n" + "  13→y = 2\n" * 10
    redacted, count = redact(text)
    assert count == 1
    assert secret.split()[-1].split("=")[-1] not in redacted


def test_scanning_a_long_clean_text_holds_one_piece_at_a_time() -> None:
    text = "    120→    subtotal = sum(item.price for item in cart.items)\n" * 40_000  # 2.6M chars
    redact(text[:1_000])
    tracemalloc.start()
    redacted, count = redact(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (redacted, count) == (text, 0)
    assert peak < 1_000_000  # the whole text as UTF-8 would be 2.7 MB


def test_redaction_never_holds_a_lower_cased_copy_of_the_whole_text() -> None:
    # One emoji makes the whole text four bytes a character. Redacting builds the new text
    # from the old one (its pieces, then the result); the lower-cased copy of the whole
    # text used to find the literals came on top of that.
    import sys
    import tracemalloc

    text = "🙂 " + "".join(
        f"line {i}: Password = hunter{i}xyz and more words\n" for i in range(6_000)
    )
    redact("password = warmup1")
    tracemalloc.start()
    redacted, found = redact(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert found == 6_000
    assert "hunter" not in redacted
    assert peak < 3 * sys.getsizeof(text)  # was 4×


def test_finding_literals_in_a_text_with_nothing_to_redact_holds_only_pieces() -> None:
    # Literals present, no secret: nothing is rebuilt, so the peak is what finding the
    # literals takes (lower-casing non-ASCII text takes 12 bytes a character of scratch).
    import sys
    import tracemalloc

    lines = "the field and the list stay as plain words\n" * 99
    text = "🙂 " + ("the password field stays a word\n" + lines) * 60
    redact("password = warmup1")
    tracemalloc.start()
    redacted, found = redact(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (redacted, found) == (text, 0)
    assert peak < 0.6 * sys.getsizeof(text)  # was 4× (a whole lower-cased copy, scratch)
