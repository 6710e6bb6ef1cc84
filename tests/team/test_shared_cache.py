"""A team server's cache is its Redis (REDIS_URL): every web process reads the sessions and the
built compare pages from it. (Redis away: tests/test_cache_redis_away.py.)"""

from __future__ import annotations

import os
from typing import Any

import pytest
import redis
from django.core.cache import caches
from django.test import Client
from django.urls import reverse

from evaluations.cache import TolerantRedisCache
from evaluations.models import Project
from tests.compare_helpers import baseline_and_candidate

pytestmark = [pytest.mark.team, pytest.mark.django_db]


def redis_keys(pattern: str) -> list[bytes]:
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        return list(client.scan_iter(match=pattern))
    finally:
        client.close()


def test_sessions_and_compare_pages_are_kept_in_redis(acme: Project, alice: Any) -> None:
    assert isinstance(caches["default"], TolerantRedisCache)
    baseline, candidate = baseline_and_candidate(acme)
    client = Client()
    assert client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"}).status_code == 302
    session_key = client.cookies["sessionid"].value
    assert redis_keys(f"evalsite:*cached_db{session_key}")
    url = f"{reverse('compare')}?baseline={baseline.pk}&candidate={candidate.pk}"
    before = set(redis_keys("evalsite:*compare-page:*"))
    pages = [client.get(url) for _ in range(3)]
    assert all(page.status_code == 200 for page in pages)
    assert pages[1].content == pages[2].content
    assert len(set(redis_keys("evalsite:*compare-page:*")) - before) == 1


def test_clearing_the_cache_leaves_the_task_queue_alone() -> None:
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        client.rpush("django_q:evalsite:probe", b"a task")
        caches["default"].set("mine", "value")
        assert caches["default"].get("mine") == "value"
        caches["default"].clear()
        assert caches["default"].get("mine") is None
        assert client.lrange("django_q:evalsite:probe", 0, -1) == [b"a task"]
    finally:
        client.delete("django_q:evalsite:probe")
        client.close()
