"""Path converters and id bounds shared by the pages and the API."""

from __future__ import annotations


class IdConverter:
    """A database id: at most 18 digits, so it always fits a 64-bit integer column. A longer
    number matches no endpoint (a JSON 404) instead of overflowing the database driver."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


MAX_ID = 10**18 - 1
