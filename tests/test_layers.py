"""Layers import downward only (docs/architecture.md): a module may import from its own package and the layers
below it, never above, and never from a peer package of its own layer; codec/ and store/ never import pyspark;
only the packages that run Spark import it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark"
# one layer per package (or top-level module); packages of one layer are peers and never import each other
LAYERS = {"checks": 0, "progress": 0,
          "findings": 1, "documents": 1,
          "codec": 2,
          "store": 3,
          "rocketmq": 4,
          "lookup": 5,
          "verify": 6, "rebuild": 6,
          "recovery": 7,
          "report": 8, "datasource": 8,
          "spark": 9,
          "cli": 10}
SPARK_PACKAGES = {"datasource", "spark"}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "rocketstore_spark" and len(parts) > 1 else None


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, ``from rocketstore_spark import x`` counted as ``rocketstore_spark.x``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rocketstore_spark":
                out |= {f"rocketstore_spark.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    return out


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def test_the_layers_are_the_packages():
    found = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert found == set(LAYERS), f"packages without a layer: {found - set(LAYERS)}; layers without a package: " \
                                 f"{set(LAYERS) - found}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    module = "rocketstore_spark." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    own = package_of(module)
    assert own in LAYERS, f"{module} is in no layer: add its package to LAYERS and docs/architecture.md"
    for imported in imports(path):
        target = package_of(imported)
        if target is not None and target != own:
            assert target in LAYERS, f"{module} imports {imported}, which is in no layer"
            assert LAYERS[target] < LAYERS[own], \
                f"{module} imports {imported}: {target}/ is " + \
                ("a peer of " if LAYERS[target] == LAYERS[own] else "above ") + f"{own}/"
        if imported.startswith("pyspark"):
            assert own in SPARK_PACKAGES, f"{module} imports {imported}: only {sorted(SPARK_PACKAGES)} run Spark"


def test_the_rule_sees_module_imports(tmp_path):
    """The check must see both import forms (a rule that skipped ``from rocketstore_spark import x`` let
    verify import rebuild before)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from rocketstore_spark import rebuild\nimport rocketstore_spark.verify.store\n")
    assert imports(probe) == {"rocketstore_spark.rebuild", "rocketstore_spark.verify.store"}
