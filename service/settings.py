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
    # Per-client token buckets (per worker process); generous so only abuse is refused.
    rate_limit_enabled: bool = True
    rate_limit_estimates_per_s: float = Field(default=200.0, gt=0)
    rate_limit_estimates_burst: int = Field(default=400, ge=1)
    rate_limit_calibrations_per_s: float = Field(default=1.0, gt=0)
    rate_limit_calibrations_burst: int = Field(default=20, ge=1)
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
