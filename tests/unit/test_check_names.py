"""A plan's step names checked in one pass: the same names pass and fail as one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.keys import check_name, check_names

valid = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}", fullmatch=True)
# names that are close to valid: newlines inside or at an end, too long, empty, other letters
near = st.one_of(
    valid,
    st.builds(lambda a, b: f"{a}\n{b}", valid, valid),
    st.builds(lambda a: f"{a}\n", valid),
    st.builds(lambda a: f"\n{a}", valid),
    st.just(""),
    st.just("a" * 65),
    st.just("a" * 64),
    st.just("1abc"),
    st.just("é"),
    st.just("a b"),
    st.text(max_size=8),
)


def one_by_one(what: str, names: list[str]) -> str | None:
    """The reference: check_name of each name in order; the first error's message, or None."""
    try:
        for name in names:
            check_name(what, name)
    except ValueError as e:
        return str(e)
    return None


def in_one_pass(what: str, names: list[str]) -> str | None:
    try:
        check_names(what, names)
    except ValueError as e:
        return str(e)
    return None


@settings(max_examples=400)
@given(st.lists(near, max_size=12))
def test_names_checked_together_pass_and_fail_as_checked_one_by_one(names: list[str]) -> None:
    """Every list of names passes, or fails naming the same first bad name, as it does when
    each name is checked alone."""
    assert in_one_pass("step", names) == one_by_one("step", names)


def test_a_name_holding_a_newline_is_not_taken_for_two() -> None:
    """Two valid names joined by a newline inside one name fail, as that name alone fails."""
    message = in_one_pass("step", ["fetch", "a\nb"])
    assert message is not None
    assert "'a\\nb'" in message


def test_a_long_plan_of_valid_names_passes() -> None:
    """A plan of 1,000 valid step names passes."""
    assert in_one_pass("step", [f"s{i:05d}" for i in range(1000)]) is None
