"""Open-loop traffic: request arrivals and length mixes served by continuous batching."""
