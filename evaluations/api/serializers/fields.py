"""Fields every endpoint shape shares."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from evaluations.converters import MAX_ID

# Formats datetimes as every DateTimeField here does (ISO 8601, UTC as "Z", in TIME_ZONE); it
# keeps no per-request state, so one instance serves every thread.
_DATETIME = serializers.DateTimeField(read_only=True)


def id_field(**kwargs: Any) -> serializers.IntegerField:
    """A database id in a body or query string: bounded, so it never overflows a column."""
    return serializers.IntegerField(min_value=1, max_value=MAX_ID, **kwargs)


# The largest value every integer column holds (PostgreSQL's `integer`, Django's PositiveIntegerField).
MAX_COUNT = 2**31 - 1


def count_field(*, min_value: int = 0, **kwargs: Any) -> serializers.IntegerField:
    """A count, a page or a duration in a body or query string, kept in an integer column:
    bounded, so it never overflows one."""
    return serializers.IntegerField(min_value=min_value, max_value=MAX_COUNT, **kwargs)
