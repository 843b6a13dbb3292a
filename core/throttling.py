"""The API's throttles: DRF's keys and rates, counted in one atomic step of the shared store.

DRF's own throttles keep each client's request times as one cached list: read it, then write
it back with this request added. On the database's cache table (CACHES) the write was a
transaction of four statements, one of them a COUNT(*) of the whole table (Django's cull runs
on every write), so each API request paid six round trips before its view ran; and two
requests at once, in two server processes or two threads, could both read the same list and
both write it back, one of them lost, so a burst passed more than the rate.

Here a client's count is one row of the cache table (one key in Redis), bumped and read back
by one statement that no other request can interleave: a window opens with the client's
first request and lasts the rate's period, and at most the rate's number of requests pass in
it, whichever process answers them. When it closes, the next request opens a new one (so a
client can spend one window's allowance at its end and the next one's right after it; DRF's
list allowed no more than the rate in any period, but only for requests one at a time).
Refused requests count too, which changes nothing: the window closes when it was going to.

The keys (which client, which scope) stay DRF's: `AnonRateThrottle` and `UserRateThrottle`
below only change where and how the count is kept. Expired rows are deleted now and then
(`CLEANUP_ONE_IN`), as Django's cull would have done.
"""

import hashlib
import random
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.redis import RedisCache
from django.db import connections, models, router
from rest_framework import throttling

# About one request in this many also deletes the cache table's expired rows (an indexed
# range delete): the table stays as large as the clients of the last period.
CLEANUP_ONE_IN = 1000
# cache_key is a varchar(255) column; an identity longer than this is stored by its digest.
MAX_KEY_CHARS = 200

_REDIS_SCRIPTS: dict[str, object] = {}
# INCR and the expiry in one script: Redis runs a script alone, so no other request sees the
# count without its expiry (a count left without one would refuse the client for good).
_REDIS_HIT = """
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
"""


def _store_key(cache, key: str) -> str:
    # Not DRF's own key: rows it left (pickled lists) are not counts.
    key = f"{key}:window"
    if len(key) > MAX_KEY_CHARS:
        key = "throttle_window_" + hashlib.sha256(key.encode()).hexdigest()
    return cache.make_key(key)


def _hit_database(cache: DatabaseCache, key: str, period: int, now: datetime) -> tuple[int, float]:
    db = router.db_for_write(cache.cache_model_class)
    connection = connections[db]
    table = connection.ops.quote_name(settings.CACHES["default"]["LOCATION"])
    ops = connection.ops
    closes = datetime.fromtimestamp(now.timestamp() + period, tz=UTC)
    # One statement, atomic on PostgreSQL and SQLite alike: a row whose window has closed
    # starts a new one; every SET expression reads the row as it was.
    sql = (
        f"INSERT INTO {table} (cache_key, value, expires) VALUES (%s, '1', %s) "
        f"ON CONFLICT (cache_key) DO UPDATE SET "
        f"value = CASE WHEN {table}.expires > %s "
        f"THEN CAST(CAST({table}.value AS INTEGER) + 1 AS TEXT) ELSE '1' END, "
        f"expires = CASE WHEN {table}.expires > %s THEN {table}.expires ELSE %s END "
        f"RETURNING value, expires"
    )
    adapted_now = ops.adapt_datetimefield_value(now)
    adapted_closes = ops.adapt_datetimefield_value(closes)
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, adapted_closes, adapted_now, adapted_now, adapted_closes])
        value, expires = cursor.fetchone()
        if random.randrange(CLEANUP_ONE_IN) == 0:
            cursor.execute(f"DELETE FROM {table} WHERE expires < %s", [adapted_now])
    expression = models.Expression(output_field=models.DateTimeField())
    for converter in ops.get_db_converters(expression) + expression.get_db_converters(connection):
        expires = converter(expires, expression, connection)
    return int(value), (expires - now).total_seconds()


def _hit_redis(key: str, period: int) -> tuple[int, float]:
    location = settings.CACHES["default"]["LOCATION"]
    script = _REDIS_SCRIPTS.get(location)
    if script is None:
        import redis

        # The cache's own server and timeouts (settings.CACHES), one connection pool a process;
        # the script is sent once and then called by its digest (EVALSHA).
        options = settings.CACHES["default"].get("OPTIONS", {})
        client = redis.Redis.from_url(
            location,
            socket_timeout=options.get("socket_timeout"),
            socket_connect_timeout=options.get("socket_connect_timeout"),
        )
        script = _REDIS_SCRIPTS[location] = client.register_script(_REDIS_HIT)
    count, ttl_ms = script(keys=[key], args=[int(period * 1000)])
    return int(count), int(ttl_ms) / 1000


class WindowThrottle:
    """DRF's SimpleRateThrottle counted in one atomic step of the shared store (above)."""

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        # DRF's `cache` attribute is the default cache's proxy; the backend tells the store.
        cache = caches["default"]
        if isinstance(cache, DatabaseCache):
            now = datetime.fromtimestamp(self.timer(), tz=UTC)
            count, self.seconds_left = _hit_database(
                cache, _store_key(cache, self.key), self.duration, now
            )
        elif isinstance(cache, RedisCache):
            count, self.seconds_left = _hit_redis(_store_key(cache, self.key), self.duration)
        else:  # a per-process cache (a test's settings): DRF's own way
            return super().allow_request(request, view)
        return count <= self.num_requests

    def wait(self) -> float | None:
        if not hasattr(self, "seconds_left"):
            return super().wait()
        return max(self.seconds_left, 0.0)


class AnonRateThrottle(WindowThrottle, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(WindowThrottle, throttling.UserRateThrottle):
    pass
