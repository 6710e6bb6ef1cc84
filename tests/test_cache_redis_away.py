"""The team server's shared cache (evaluations/cache.py) when its Redis is away: pages, logins
and sessions go on working from the database, nothing is an error page. (With a Redis that
answers, tests/team/test_shared_cache.py.)"""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import reverse

from evaluations.cache import TolerantRedisCache
from evaluations.models import Project, Run
from tests.compare_helpers import baseline_and_candidate

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens on it once the socket is closed


@pytest.fixture
def redis_away() -> Any:
    # The warning comes once per WARN_EVERY seconds: a test that saw Redis away just before
    # would otherwise have taken this test's warning.
    TolerantRedisCache._warned_at = 0.0
    with override_settings(
        CACHES={"default": {"BACKEND": "evaluations.cache.TolerantRedisCache",
                            "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
                            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}},
        SESSION_ENGINE="django.contrib.sessions.backends.cached_db",
    ):
        yield


def test_the_cache_answers_misses_while_redis_is_away(redis_away: None, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="evaluations.cache"):
        cache.set("k", "v")
        assert cache.get("k", "default") == "default"
        assert cache.add("k", "v") is False
        assert cache.get_many(["k"]) == {}
        assert cache.delete("k") is False
        with pytest.raises(ValueError):
            cache.incr("k")
    assert "the cache (Redis) is unavailable" in caplog.text


def test_logging_in_and_the_compare_page_work_while_redis_is_away(redis_away: None, acme: Project,
                                                                  alice: Any) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    client = Client()
    login = client.post(reverse("login"), {"username": "alice", "password": "alice-pass-123"})
    assert login.status_code == 302
    assert Session.objects.count() == 1  # kept in the database, as cached_db does
    url = f"{reverse('compare')}?baseline={baseline.pk}&candidate={candidate.pk}"
    for _ in range(3):  # built each time: nothing can be cached
        response = client.get(url)
        assert response.status_code == 200
        assert "2 regressions" in response.content.decode()
    assert Run.objects.count() == 2
    client.post(reverse("logout"))
    assert Session.objects.count() == 0
    assert client.get(url).status_code == 302  # to the login page: the session is gone
