"""Signals other parts connect to (issue 32's notifications)."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent once per scoring batch that wrote results, after its transaction committed, with
#: the keyword argument `monitor_id`.
monitor_scored = Signal()
