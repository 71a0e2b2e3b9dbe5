"""Checkpoint schedules and revision names against Pythia's published branch list."""

import pytest

from san.models.revisions import log_then_every, revision_name, step_of, tokens_of


def test_pythias_schedule_is_its_154_branches():
    steps = log_then_every(143000, 1000, 512)
    want = [0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000))
    assert steps == want and len(steps) == 154
    assert revision_name(steps[-1]) == "step143000"


def test_the_default_log_part_stops_below_every_and_last_is_kept():
    assert log_then_every(50, 20) == [0, 1, 2, 4, 8, 16, 20, 40, 50]
    assert log_then_every(3, 20) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="every >= 1"):
        log_then_every(10, 0)


@pytest.mark.parametrize(
    ("name", "step", "tokens"),
    [
        ("step0", 0, None),
        ("step143000", 143000, None),
        ("stage1-step1000-tokens5B", 1000, 5 * 10**9),
        ("stage2-ingredient1-step23852-tokens50B", 23852, 50 * 10**9),
        ("main", None, None),
        ("mystep12", None, None),
    ],
)
def test_step_and_tokens_are_read_from_the_name(name, step, tokens):
    assert step_of(name) == step and tokens_of(name) == tokens
