"""Pure estimation core: stdlib, numpy and scipy only (no web, validation or database imports)."""
