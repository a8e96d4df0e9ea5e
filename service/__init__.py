"""Ridgeline: roofline estimates of LLM inference speed and cost per accelerator."""

__version__ = "0.1.0"
