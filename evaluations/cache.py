"""The shared cache of a team server: Django's Redis cache, but a Redis that is away (restarted,
unreachable) makes every read a miss and every write a no-op, with a warning, instead of an
error page. What the cache holds can always be rebuilt: sessions are `cached_db` (the
database keeps them), compare pages are rebuilt from the stored comparison, and API throttle
counts start again.

Settings (evalsite/settings.py): with REDIS_URL set, or EVALSITE_CACHE_URL to use another
Redis, this is the default cache and sessions are read from it; without, each process keeps
its own in memory and sessions are read from the database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
T = TypeVar("T")
WARN_EVERY = 30.0  # seconds: one warning, not one per request, while Redis is away


class _Client(RedisCacheClient):
    """Django's Redis client, keeping one `redis.Redis` per connection pool: Django builds a new
    one for every cache call, and building one (its table of ~170 response callbacks) cost
    more than the call itself, twice per page view."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._clients[index] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class TolerantRedisCache(RedisCache):
    _warned_at = 0.0

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _Client

    def _tolerate(self, call: Callable[[], T], fallback: T) -> T:
        try:
            return call()
        except RedisError as exc:  # connection refused or reset, timeouts, a server restarting
            _warn(exc)
            return fallback

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._tolerate(lambda: super(TolerantRedisCache, self).get(key, default, version), default)

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return self._tolerate(lambda: super(TolerantRedisCache, self).get_many(keys, version), {})

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._tolerate(lambda: super(TolerantRedisCache, self).has_key(key, version), False)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._tolerate(lambda: super(TolerantRedisCache, self).set(key, value, timeout, version), None)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._tolerate(lambda: super(TolerantRedisCache, self).add(key, value, timeout, version), False)

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT,
                 version: int | None = None) -> list[Any]:
        return self._tolerate(lambda: super(TolerantRedisCache, self).set_many(data, timeout, version), list(data))

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._tolerate(lambda: super(TolerantRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._tolerate(lambda: super(TolerantRedisCache, self).delete(key, version), False)

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._tolerate(lambda: super(TolerantRedisCache, self).delete_many(keys, version), None)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        try:
            return super().incr(key, delta, version)
        except RedisError as exc:  # as for a missing key (Django's contract): the caller starts afresh
            _warn(exc)
            raise ValueError(f"Key {key!r} not found: the cache is unavailable") from exc

    def clear(self) -> None:
        """Only this cache's keys: Django's clear() empties the whole Redis database, and the
        task queue may live in the same one."""
        def delete_ours() -> None:
            client = self._cache.get_client(None, write=True)  # type: ignore[attr-defined]
            keys = list(client.scan_iter(match=f"{self.key_prefix}:*" if self.key_prefix else "*:*", count=1000))
            for start in range(0, len(keys), 1000):
                client.delete(*keys[start:start + 1000])

        self._tolerate(delete_ours, None)


def _warn(exc: Exception) -> None:
    now = time.monotonic()
    if now - TolerantRedisCache._warned_at >= WARN_EVERY:
        TolerantRedisCache._warned_at = now
        log.warning("the cache (Redis) is unavailable, working without it: %s", exc)
