import pytest

from compaction import CompactionConfig, ConfigError


def test_defaults_are_the_seed_numbers():
    c = CompactionConfig()
    assert (c.context_length, c.threshold_percent, c.min_threshold_tokens) == (200_000, 0.5, 64_000)
    assert (c.protect_first_n, c.tail_token_budget, c.fold_min_chars) == (3, 20_000, 200)
    assert (c.content_max, c.content_head, c.content_tail) == (6_000, 4_000, 1_500)
    assert c.summary_input_max_chars == 160_000
    assert (c.anti_thrash_min_saving, c.anti_thrash_window) == (0.10, 2)
    assert c.abort_on_summary_failure is False
    assert c.sanitize_mode == "stub"
    assert c.image_tokens == 1_600


def test_round_trip_through_dict():
    c = CompactionConfig(context_length=32_000, sanitize_mode="strip")
    assert CompactionConfig.from_dict(c.to_dict()) == c


def test_from_dict_accepts_ints_for_floats_and_fills_defaults():
    c = CompactionConfig.from_dict({"threshold_percent": 1, "tail_token_budget": 500})
    assert c.threshold_percent == 1.0
    assert c.tail_token_budget == 500
    assert c.protect_first_n == 3


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"context_length": "big"}, "context_length"),
        ({"context_length": 0}, "context_length"),
        ({"context_length": True}, "context_length"),
        ({"threshold_percent": 0}, "threshold_percent"),
        ({"threshold_percent": 1.5}, "threshold_percent"),
        ({"threshold_percent": float("nan")}, "threshold_percent"),
        ({"protect_first_n": -1}, "protect_first_n"),
        ({"tail_token_budget": 1.5}, "tail_token_budget"),
        ({"content_head": 5_000}, "content_head"),
        ({"abort_on_summary_failure": "yes"}, "abort_on_summary_failure"),
        ({"sanitize_mode": "delete"}, "sanitize_mode"),
        ({"model": ""}, "model"),
        ({"anti_thrash_min_saving": -0.1}, "anti_thrash_min_saving"),
        ({"no_such_field": 1}, "no_such_field"),
    ],
)
def test_from_dict_names_the_bad_field(data, field):
    with pytest.raises(ValueError, match=field) as info:
        CompactionConfig.from_dict(data)
    assert isinstance(info.value, ConfigError)
    assert info.value.field == field


def test_from_dict_rejects_non_mappings():
    with pytest.raises(ConfigError):
        CompactionConfig.from_dict(["context_length", 1])  # type: ignore[arg-type]


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        CompactionConfig().context_length = 5  # type: ignore[misc]
