"""A Redis cache whose outage makes pages slower, never broken."""

import logging

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class ForgivingRedisCache(RedisCache):
    """Treats a Redis error as a cache miss (on reads) or a no-op (on writes).

    The cache only holds rendered HTML that the database can always rebuild, so Redis
    restarting must not turn page views into errors.
    """

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
