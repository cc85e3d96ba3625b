"""The writer builds its events with the model's validator called directly (session 16): the
same instance, set fields and errors as calling the model class."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentledger.events.models import CheckpointSaved, Event, StepStarted
from tests.unit.event_samples import samples


def direct(cls: type[Event], data: dict[str, Any]) -> Any:
    """What RunWriter.append does: the validator of ``cls`` on ``data``."""
    return cls.__pydantic_validator__.validate_python(dict(data))


def given_fields(event: Event) -> dict[str, Any]:
    """The fields an event was built with (the ones it has set)."""
    return {name: getattr(event, name) for name in event.model_fields_set}


@pytest.mark.parametrize("sample", samples(), ids=lambda e: type(e).__name__)
def test_every_event_kind_validated_directly_is_the_model_built_by_its_class(sample: Event) -> None:
    """Every kind of event: the same type, fields, and set fields."""
    cls, data = type(sample), given_fields(sample)
    built, validated = cls(**data), direct(cls, data)
    assert type(validated) is cls
    assert validated == built
    assert validated.__dict__ == built.__dict__
    assert validated.model_fields_set == built.model_fields_set


def broken(sample: Event, change: dict[str, Any]) -> tuple[str, list[Any], list[Any]]:
    """The errors of the class and of the direct validator for the sample's fields changed."""
    cls, data = type(sample), {**given_fields(sample), **change}
    with pytest.raises(ValidationError) as by_class:
        cls(**data)
    with pytest.raises(ValidationError) as by_validator:
        direct(cls, data)
    assert str(by_validator.value) == str(by_class.value)
    # the context holds the validator's exception object, equal by identity only
    return (
        cls.__name__,
        by_class.value.errors(include_context=False),
        by_validator.value.errors(include_context=False),
    )


@pytest.mark.parametrize(
    "change", [{"seq": "x"}, {"fence": -1.5}, {"unknown": 1}, {"run_id": None}], ids=str
)
def test_invalid_fields_fail_alike(change: dict[str, Any]) -> None:
    """A wrong type, an unknown field or a null where a value is needed: the same errors."""
    sample = next(e for e in samples() if type(e) is StepStarted)
    _, by_class, by_validator = broken(sample, change)
    assert by_validator == by_class


def test_a_model_validator_refuses_alike() -> None:
    """An event whose after-validator refuses it (misaligned blob arrays): the same error."""
    sample = next(e for e in samples() if type(e) is CheckpointSaved)
    _, by_class, by_validator = broken(sample, {"blob_kinds": []})
    assert by_validator == by_class
