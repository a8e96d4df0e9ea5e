"""Who is calling: a verified API key (cached briefly) or the client's address.

Rate limits and early authentication need to know whether an ``X-API-Key`` is real before the
request reaches its route. ``KeyVerifier`` checks a key against the database once and caches
the answer for ``ttl_s`` seconds (a revoked key keeps its own rate bucket at most that long;
routes still authorise every write against the database, and private calibration profiles
are shown only while their owner's key is unrevoked, checked in the query that reads them:
``calibration_repository.visible_to``). ``client_address`` honours
``X-Forwarded-For`` only when the connection comes from a configured trusted proxy.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session, sessionmaker
from starlette.types import Scope

from service.db.session import session_scope
from service.services.auth import KEY_PREFIX, authenticate
from service.services.errors import AuthenticationError

KEY_CACHE_TTL_S = 30.0
MAX_CACHED_KEYS = 10_000
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def api_key_header(scope: Scope) -> str | None:
    """Return the ``X-API-Key`` header's value, or None."""
    for name, value in scope["headers"]:
        if name == b"x-api-key" and value:
            return str(value.decode("latin-1"))
    return None


def well_formed(key: str) -> bool:
    """Return whether ``key`` has the shape of a Ridgeline key (``rl_<prefix>_<secret>``)."""
    return key.startswith(KEY_PREFIX + "_") and key.count("_") == 2


class KeyVerifier:
    """Verified keys' lookup prefixes (or None for invalid keys), cached for ``ttl_s``."""

    def __init__(
        self,
        ttl_s: float = KEY_CACHE_TTL_S,
        max_entries: int = MAX_CACHED_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[bytes, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _digest(key: str) -> bytes:
        return hashlib.sha256(key.encode()).digest()

    def cached(self, key: str) -> tuple[bool, str | None]:
        """Return ``(known, prefix)``: known is False when the key must be verified first."""
        if not well_formed(key):
            return True, None
        entry = self._entries.get(self._digest(key))
        if entry is None or entry[0] < self._clock():
            return False, None
        return True, entry[1]

    def verify(self, factory: sessionmaker[Session], pepper: str, key: str) -> str | None:
        """Check ``key`` against the database; return its prefix if valid, else None."""
        try:
            with session_scope(factory) as session:
                prefix: str | None = authenticate(session, pepper, key).prefix
        except AuthenticationError:
            prefix = None
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[self._digest(key)] = (self._clock() + self._ttl_s, prefix)
        return prefix


def parse_networks(text: str) -> tuple[Network, ...]:
    """Parse a comma-separated list of addresses or CIDR networks (ValueError if invalid)."""
    return tuple(
        ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip()
    )


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(scope: Scope, trusted: Sequence[Network]) -> str:
    """Return the client's address: the peer, or, behind trusted proxies, the forwarded one.

    Only when the peer is a trusted proxy is ``X-Forwarded-For`` read, right to left, skipping
    trusted hops; the first untrusted address is the client (anything left of it could have
    been written by the client itself).
    """
    client = scope.get("client")
    peer = str(client[0]) if client else "unknown"
    if not trusted or not _trusted(peer, trusted):
        return peer
    forwarded: list[str] = []
    for name, value in scope["headers"]:
        if name == b"x-forwarded-for":
            forwarded += [hop.strip() for hop in value.decode("latin-1").split(",")]
    for hop in reversed(forwarded):
        if hop and not _trusted(hop, trusted):
            return hop
    return peer
