"""The engine imports no web, validation or database library."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("fastapi", "starlette", "pydantic", "sqlalchemy", "httpx")

SCRIPT = """
import importlib, pkgutil, sys
import service.engine as engine
names = [m.name for m in pkgutil.walk_packages(engine.__path__, "service.engine.")]
for name in names:
    importlib.import_module(name)
assert "service.engine.estimate" in sys.modules and "service.engine.operators" in sys.modules
print(",".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_engine_imports_are_pure() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.strip().split(","))
    assert "numpy" in loaded
    assert loaded.isdisjoint(FORBIDDEN), loaded & set(FORBIDDEN)
