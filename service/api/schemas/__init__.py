"""Pydantic request and response models (API layer only)."""
