"""CORS for real: gunicorn with two gevent workers on Redis and PostgreSQL, as in production.

The issue's check: a preflight of ``/api/probboard/latest`` as a browser sends it, and the
issue's ``curl -H 'Origin: https://example.org' -X OPTIONS`` (an Origin alone), are answered
204 with the CORS headers; the reads that follow, their 429 included, are readable by the page.
"""

from __future__ import annotations

from harness.processes import RedisServer, Service
from tests.conftest import TEST_PEPPER
from tests.support.contract import validated
from tests.unit.test_cors import EXPOSED, LATEST, SITE


def test_a_preflight_is_204_with_the_cors_headers_and_reads_are_readable(
    fresh_redis: RedisServer, service: Service, postgres_database: str
) -> None:
    service.env.update(
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=postgres_database,
        API_KEY_PEPPER=TEST_PEPPER,
        GUEST_RATE_LIMIT="2 per day",  # no window edge between these few requests
    )
    # Own gunicorn: its guest limit (2 per day) is this test's to spend.
    service.start_web(workers=2)
    asked = {
        "Origin": SITE,
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization, x-api-key",
    }

    # Repeated: none is counted against the guest limit (the two reads below are served).
    for _ in range(12):
        status, headers, body = service.get(LATEST, asked, method="OPTIONS")
        assert status == 204, (status, body)
        assert body == b""
        assert headers["Access-Control-Allow-Origin"] == "*"
        assert {m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")} == {
            "GET",
            "HEAD",
            "OPTIONS",
        }
        assert headers["Access-Control-Allow-Headers"] == "authorization, x-api-key"
        assert headers["Access-Control-Max-Age"] == "600"
        assert "Access-Control-Allow-Credentials" not in headers

    # The curl: an Origin alone is answered as a preflight.
    status, headers, body = service.get(LATEST, {"Origin": "https://example.org"}, method="OPTIONS")
    assert (status, body) == (204, b"")
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Methods" in headers, headers

    # A plain OPTIONS keeps Flask's answer, and gets no CORS headers.
    status, headers, _ = service.get(LATEST, method="OPTIONS")
    assert status == 200
    assert not [name for name in headers if name.startswith("Access-Control-")]

    for _ in range(2):
        status, headers, body = service.get(LATEST, {"Origin": SITE})
        assert status == 200, body
        validated("board", body)
        assert headers["Access-Control-Allow-Origin"] == "*"
        exposed = {h.strip() for h in headers["Access-Control-Expose-Headers"].split(",")}
        assert exposed == EXPOSED
    status, headers, body = service.get(LATEST, {"Origin": SITE})
    assert status == 429, body
    assert validated("error", body)["code"] == "rate_limited"
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert int(headers["Retry-After"]) >= 1
