"""The result file and its cells: lines, tables, the targets checked and the FAIL cells."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration.quality import ErrorStats

RESULT = Path(__file__).resolve().parents[1] / "results" / "accuracy.md"


lines: list[str] = []


def out(text: str = "") -> None:
    """Print a line and keep it for the result file."""
    print(text, flush=True)
    lines.append(text)


def fmt(s: ErrorStats) -> str:
    """MdAPE / MAPE cell."""
    if s.n == 0:
        return "–"
    return f"{s.mdape_pct:5.1f} / {s.mape_pct:5.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Emit a markdown table."""
    out("| " + " | ".join(header) + " |")
    out("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        out("| " + " | ".join(row) + " |")
    out()


def versus(after: ErrorStats, before: ErrorStats) -> str:
    """Calibrated cell; bold with FAIL when its median APE is worse than the spec sheet's."""
    cell = fmt(after)
    if after.n and before.n and after.mdape_pct > before.mdape_pct:
        FAILURES.append(cell)
        return f"**{cell} FAIL**"
    return cell


def by_load(load: NDArray[np.float64], cell: Callable[[NDArray[np.bool_]], str]) -> list[str]:
    """One cell per LOAD_BANDS band: ``cell`` of the band's points and their count, or – when
    none."""
    cells = []
    for _, low, high in LOAD_BANDS:
        sel = (load >= low) & (load <= high)
        cells.append(f"{cell(sel)} ({int(sel.sum())})" if sel.any() else "–")
    return cells


FAILURES: list[str] = []
CHECKS: list[tuple[str, float, float, float, int]] = []  # (what, value, low, high, decimals)


def check(what: str, value: float, low: float, high: float, decimals: int = 1) -> None:
    """Record a number against its target range for the summary table (shown with
    ``decimals`` places, enough to tell a miss from a hit)."""
    CHECKS.append((what, value, low, high, decimals))


# Load bands of the coverage-by-load table: label, lowest and highest load (inclusive).
LOAD_BANDS = (("≤ 8", 0, 8), ("16–32", 9, 32), ("48–96", 33, 96), ("≥ 128", 97, 1e9))
