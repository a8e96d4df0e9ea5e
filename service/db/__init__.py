"""Persistence: SQLAlchemy models, engine/session factories and repositories."""
