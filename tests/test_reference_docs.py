"""The catalog tables in docs/reference/ say what hardware_catalog/ holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_tables import accelerator_tables, model_tables

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"


@pytest.mark.parametrize(
    ("document", "tables"),
    [("accelerators.md", accelerator_tables), ("models.md", model_tables)],
)
def test_reference_tables_match_catalog(document: str, tables: object) -> None:
    text = (REFERENCE / document).read_text()
    assert callable(tables)
    stale = [label for label, table in tables().items() if table not in text]
    assert not stale, (
        f"docs/reference/{document} sections {stale} differ from hardware_catalog/; "
        "regenerate them with `python tests/reference_tables.py`"
    )
