"""Sections of benchmarks/accuracy.py: held-out protocols, diagnostics and their report."""
