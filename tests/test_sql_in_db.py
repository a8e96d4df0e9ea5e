"""SQL is written only in ``service/db``: no module elsewhere imports SQLAlchemy's SQL builders.

Types (``Session``, ``Engine``, ``Select``) and exceptions may be imported anywhere; building a
statement (``select``, ``text``, ``func``, ``aliased`` ...) belongs in a repository.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "service"
SQL_BUILDERS = {
    "select",
    "insert",
    "update",
    "delete",
    "text",
    "func",
    "bindparam",
    "null",
    "literal",
    "and_",
    "or_",
    "case",
    "aliased",
    "join",
    "outerjoin",
}


def _sql_imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name in SQL_BUILDERS]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("sqlalchemy")]
    return found


def test_only_service_db_builds_sql() -> None:
    offenders = {
        str(path.relative_to(ROOT)): names
        for path in sorted(ROOT.rglob("*.py"))
        if path.relative_to(ROOT).parts[0] != "db" and (names := _sql_imports(path))
    }
    assert offenders == {}


def test_the_check_sees_a_builder(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from sqlalchemy import Engine, select\nimport sqlalchemy as sa\n")
    assert _sql_imports(module) == ["sqlalchemy.select", "sqlalchemy"]
