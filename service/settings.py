"""Service settings read from the environment (prefix ``RIDGELINE_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Documented development pepper: production refuses to start with it.
DEV_API_KEY_PEPPER = "ridgeline-dev-pepper-change-me"


class Settings(BaseSettings):
    """Runtime configuration; defaults run locally with SQLite and no secrets."""

    model_config = SettingsConfigDict(env_prefix="RIDGELINE_", extra="ignore")

    data_dir: Path = Path("./data")
    database_url: str = Field(
        default="",
        validation_alias=AliasChoices("RIDGELINE_DATABASE_URL", "DATABASE_URL", "database_url"),
    )
    migrate_on_startup: bool = True
    seed_on_startup: bool = True
    api_key_pepper: str = DEV_API_KEY_PEPPER
    require_key_for_reads: bool = False
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    # Calibration uploads carry up to MAX_MEASUREMENTS_PER_CALIBRATION rows (~150 B each as JSON).
    max_calibration_body_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    # Per-client token buckets, shared by all workers and replicas through the database
    # (``rate_limit_shared``: taken atomically per request on PostgreSQL, synced every
    # ``rate_limit_sync_s`` between one node's workers on SQLite; service/api/ratelimit.py);
    # generous so only abuse is refused.
    rate_limit_enabled: bool = True
    rate_limit_shared: bool = True
    rate_limit_sync_s: float = Field(default=0.5, gt=0)
    # Comma-separated origins allowed to call the API from a browser (CORS); empty: none.
    cors_origins: str = ""
    # Comma-separated addresses or CIDR networks of reverse proxies whose X-Forwarded-For is
    # believed (empty: none; the connection's peer address identifies the client).
    trusted_proxies: str = ""
    rate_limit_estimates_per_s: float = Field(default=200.0, gt=0)
    rate_limit_estimates_burst: int = Field(default=400, ge=1)
    rate_limit_calibrations_per_s: float = Field(default=1.0, gt=0)
    rate_limit_calibrations_burst: int = Field(default=20, ge=1)
    # Connection budget: how many PostgreSQL connections one replica (all its worker
    # processes together) may hold. Size it as (server max_connections - reserved) / replicas;
    # each worker gets budget // workers, one of them for the autocommit reader, the rest its
    # pool, with no overflow (a request that finds the pool busy for ``db_pool_timeout_s``
    # answers 503 + Retry-After instead of opening connection number 101).
    db_max_connections: int = Field(default=20, ge=2)
    db_pool_timeout_s: float = Field(default=5.0, gt=0)
    # Worker processes of this replica (``ridgeline serve --workers`` sets it for its workers).
    workers: int = Field(default=1, ge=1)
    # Start-up waits for an unreachable database: delays double from the first to the max.
    db_connect_first_delay_s: float = Field(default=0.5, gt=0)
    db_connect_max_delay_s: float = Field(default=10.0, gt=0)
    # Slow clients: idle keep-alive connections close after ``keep_alive_timeout_s``; a request
    # must send its headers within ``header_timeout_s`` and each body chunk within
    # ``body_read_timeout_s`` (408 past it); uvicorn answers 503 beyond ``max_connections``
    # open connections per worker.
    keep_alive_timeout_s: float = Field(default=5.0, gt=0)
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_read_timeout_s: float = Field(default=30.0, gt=0)
    max_connections: int = Field(default=2048, ge=1)
    # Work budgets per request (service/api/budgets.py): points of an estimate batch (items x
    # batch sizes), points of a plan (candidates x concurrency levels), bytes of an answer.
    max_estimate_points: int = Field(default=8_192, ge=1_024)
    max_plan_points: int = Field(default=65_536, ge=1)
    max_response_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    # Heavy requests (batches, big sweeps, plans, charts) running at once per worker process,
    # and how many more may wait; beyond that 503 + Retry-After (service/api/heavy.py).
    heavy_workers: int = Field(default=1, ge=1)
    # Child processes per worker that run the admitted heavy work (0: a thread of the worker;
    # then heavy CPU work competes for the worker's GIL with cheap requests).
    heavy_processes: int = Field(default=1, ge=0)
    heavy_queue: int = Field(default=8, ge=0)
    # Per-client quota on heavy requests (on top of the estimates bucket).
    rate_limit_heavy_per_s: float = Field(default=2.0, gt=0)
    rate_limit_heavy_burst: int = Field(default=8, ge=1)
    # Wall-clock budget of one calibration fit (applied by the calibration service).
    fit_time_budget_s: float = Field(default=20.0, gt=0)
    log_level: str = "INFO"
    environment: Literal["development", "test", "production"] = "development"

    @model_validator(mode="after")
    def _finalise(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'ridgeline.db'}"
        self.database_url = normalise_database_url(self.database_url)
        if self.environment == "production" and self.api_key_pepper == DEV_API_KEY_PEPPER:
            raise ValueError(
                "RIDGELINE_API_KEY_PEPPER must be set to a secret value when "
                "RIDGELINE_ENVIRONMENT=production"
            )
        return self

    @property
    def pool_size_per_worker(self) -> int:
        """Pooled connections of one worker: its share of the budget less its reader's one."""
        return max(1, self.db_max_connections // self.workers - 1)


def normalise_database_url(url: str) -> str:
    """Route plain PostgreSQL URLs to the psycopg 3 driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read once from the environment."""
    return Settings()
