"""Orchestration: load from repositories, call the engine, persist."""
