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


def whole_number(text: object, *, minimum: int = 0, maximum: int = MAX_ID) -> int | None:
    """`text` read as a whole number written in ASCII digits, from `minimum` to `maximum`;
    None for anything else. `str.isdigit()` is not enough: it is true of "³" and "①", which
    int() refuses, and of a 5,000-digit string, which int() refuses or a column overflows."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not text or len(text) > len(str(maximum)) or not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if minimum <= number <= maximum else None


def parse_id(text: object) -> int | None:
    """A database id from a query string, a form or a file: a positive whole number that fits
    any id column, else None."""
    return whole_number(text, minimum=1)
