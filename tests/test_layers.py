"""Layers import downward only (docs/architecture.md): a module may import from its own layer and the layers
below it, never above; codec/ and store/ never import pyspark."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark"
LAYERS = {"checks": 0, "findings": 0, "progress": 0, "codec": 1, "store": 2, "verify": 3, "datasource": 4, "session": 5,
          "spark_verify": 5, "recovery": 3, "cli": 6, "query": 3,
          "report": 5, "dispatch": 3, "rebuild": 3, "spark_rebuild": 5, "jars": 5, "entrypoint": 6}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "rocketstore_spark" and len(parts) > 1 else None


def imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    module = "rocketstore_spark." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    own = layer_of(module)
    assert own is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    for imported in imports(path):
        target = layer_of(imported)
        assert target is None or target <= own, f"{module} imports {imported} from a layer above"
        if own <= LAYERS["store"]:
            assert not imported.startswith("pyspark"), f"{module} imports {imported}: codec/ and store/ run without Spark"
