"""The bench's broker warm-up stops once the transaction p50 stops falling."""

from __future__ import annotations

from bench.warmup import Warmup, settled


def test_a_falling_p50_is_not_settled() -> None:
    assert not settled([30.0, 12.0, 6.0])


def test_two_windows_within_tolerance_after_the_minimum_are_settled() -> None:
    assert settled([30.0, 5.2, 5.0])


def test_fewer_windows_than_the_minimum_are_never_settled() -> None:
    assert not settled([5.0, 5.0])
    assert not settled([5.0])
    assert not settled([])


def test_the_tolerance_is_relative_to_the_larger_window() -> None:
    assert settled([9.0, 10.0, 8.6], tolerance=0.15)
    assert not settled([9.0, 10.0, 8.4], tolerance=0.15)


def test_a_rising_p50_beyond_tolerance_is_not_settled() -> None:
    assert not settled([5.0, 5.0, 7.0])


def test_the_note_names_the_windows_and_the_first_and_last_p50() -> None:
    note = Warmup((11.8, 6.1, 5.0, 4.9), 21.4, capped=False).note()
    assert "4 windows" in note
    assert "11.80 -> 4.90 ms" in note
    assert "two windows agreed" in note
    assert "cap" in Warmup((11.8, 9.0), 90.2, capped=True).note()
