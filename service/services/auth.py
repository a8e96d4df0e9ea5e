"""API keys: generation, HMAC-SHA256 storage under the server pepper, lookup and scopes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence

from sqlalchemy.orm import Session

from service.db.api_key_repository import ApiKeyRepository
from service.db.models import ApiKeyRow, utcnow
from service.db.session import begin_write
from service.services.errors import AuthenticationError, NotFoundError, PermissionDeniedError

SCOPES = ("read", "write", "admin")
KEY_PREFIX = "rl"
PREFIX_CHARS = 12  # hex characters of the lookup prefix (48 random bits)


def hash_key(pepper: str, key: str) -> str:
    """Return the hex HMAC-SHA256 of ``key`` keyed by ``pepper``."""
    return hmac.new(pepper.encode(), key.encode(), hashlib.sha256).hexdigest()


def _split(key: str) -> str | None:
    """Return the lookup prefix of a well-formed key, else None."""
    parts = key.split("_")
    if len(parts) != 3 or parts[0] != KEY_PREFIX or len(parts[1]) != PREFIX_CHARS:
        return None
    return parts[1]


def normalise_scopes(scopes: Iterable[str]) -> list[str]:
    """Validate scope names and return them sorted by strength, without duplicates."""
    wanted = set(scopes) or {"write"}
    unknown = wanted - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(sorted(unknown))}; use {', '.join(SCOPES)}")
    return [scope for scope in SCOPES if scope in wanted]


def has_scope(granted: Sequence[str], needed: str) -> bool:
    """Return True when ``granted`` covers ``needed`` (admin ⊃ write ⊃ read)."""
    rank = SCOPES.index(needed)
    return any(SCOPES.index(scope) >= rank for scope in granted if scope in SCOPES)


def create_key(
    session: Session, pepper: str, name: str, scopes: Iterable[str] = ("write",)
) -> tuple[ApiKeyRow, str]:
    """Create a key and return its row and the plaintext key (shown once, never stored)."""
    prefix = secrets.token_hex(PREFIX_CHARS // 2)
    key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32).replace('_', '-')}"
    row = ApiKeyRow(
        name=name, prefix=prefix, key_hash=hash_key(pepper, key), scopes=normalise_scopes(scopes)
    )
    ApiKeyRepository(session).add(row)
    return row, key


def authenticate(session: Session, pepper: str, key: str | None) -> ApiKeyRow:
    """Return the active key row for ``key`` or raise AuthenticationError."""
    if not key:
        raise AuthenticationError("an X-API-Key header is required")
    prefix = _split(key)
    row = ApiKeyRepository(session).by_prefix(prefix) if prefix else None
    if row is None or not hmac.compare_digest(row.key_hash, hash_key(pepper, key)):
        raise AuthenticationError("the API key is not valid")
    if row.revoked_at is not None:
        raise AuthenticationError("the API key has been revoked")
    return row


def authorise(session: Session, pepper: str, key: str | None, scope: str) -> ApiKeyRow:
    """Authenticate ``key`` and require ``scope``; raise 401- or 403-style errors."""
    row = authenticate(session, pepper, key)
    if not has_scope(row.scopes, scope):
        raise PermissionDeniedError(f"the API key lacks the '{scope}' scope")
    return row


def revoke_key(session: Session, key_id_or_prefix: str) -> ApiKeyRow:
    """Revoke a key by numeric id or lookup prefix; revoking twice keeps the first time."""
    # Read-then-write: on SQLite take the write lock first, or a commit by another connection
    # between the read and the write (a replica's rate-limit sync) fails it as "locked".
    begin_write(session)
    repo = ApiKeyRepository(session)
    row = repo.by_id(int(key_id_or_prefix)) if key_id_or_prefix.isdigit() else None
    if row is None:
        row = repo.by_prefix(key_id_or_prefix)
    if row is None:
        raise NotFoundError("api key", key_id_or_prefix)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        repo.save(row)
    return row


def list_keys(session: Session) -> Sequence[ApiKeyRow]:
    """Return every key (hashes included; callers must not print them)."""
    return ApiKeyRepository(session).all()
