"""Once-only checks that hold across processes: a key is taken by inserting it into a table
with a unique constraint (`UsedOnce`), so two web or queue processes, with or without Redis,
never both take it. A per-process cache cannot do this: without Redis each process keeps its
own, and each would accept the key once.

Each key has an expiry; expired rows are deleted by the next insert (one indexed DELETE),
so the table holds only keys still in force.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluations.models import UsedOnce


def once_key(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def once_take(*, scope: str, value: str, until: datetime | None = None, seconds: float = 0) -> bool:
    """True the first time (`scope`, `value`) is taken while it is in force, False after.
    It stays in force until `until` (or for `seconds`); then it may be taken again."""
    now = timezone.now()
    expires = until if until is not None else now + timedelta(seconds=seconds)
    key = once_key(value)
    UsedOnce.objects.filter(expires_at__lte=now).delete()
    try:
        with transaction.atomic():
            UsedOnce.objects.create(scope=scope[:40], key=key, expires_at=max(expires, now))
    except IntegrityError:
        return False
    return True
