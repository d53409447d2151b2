"""A Redis cache whose outage makes pages slower, never broken."""

import logging

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class ReusingRedisCacheClient(RedisCacheClient):
    """Django's client builds a new ``redis.Redis`` for every cache operation, filling its
    table of ~170 response callbacks each time; a page reads the cache two or three times.
    One ``redis.Redis`` per connection pool is safe to share (the pool is thread-safe)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ForgivingRedisCache(RedisCache):
    """Treats a Redis error as a cache miss (on reads) or a no-op (on writes).

    The cache only holds rendered HTML that the database can always rebuild, so Redis
    restarting must not turn page views into errors.
    """

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusingRedisCacheClient

    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except RedisError as error:
            log.warning("cache read failed, rendering without it: %s", error)
            return default

    def set(self, key, value, timeout=None, version=None):
        try:
            super().set(key, value, timeout, version)
        except RedisError as error:
            log.warning("cache write failed: %s", error)

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except RedisError as error:
            log.warning("cache delete failed: %s", error)
            return False
