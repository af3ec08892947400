"""The two test tiers stay apart: every module of tests/e2e is marked ``e2e`` (so ``-m 'not e2e'`` runs the fast
tier alone), and no module of tests/unit starts etcd members or Locust processes."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
# what starts real processes: the shared clusters and the Locust runners of support.py
PROCESS_FIXTURES = {"etcd1", "etcd3", "fresh_etcd1"}
PROCESS_HELPERS = {"run_locust", "start_locust", "headless_args", "started_cluster"}


def modules(tier: str) -> list[Path]:
    found = sorted((TESTS / tier).glob("test_*.py"))
    assert found, f"no test modules in tests/{tier}"
    return found


def marks_of(tree: ast.Module) -> set[str]:
    """The marks of a module's ``pytestmark = pytest.mark.X`` or ``[pytest.mark.X, ...]``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return {value.attr for value in values if isinstance(value, ast.Attribute)}
    return set()


@pytest.mark.parametrize("path", modules("e2e"), ids=lambda path: path.name)
def test_every_e2e_module_is_marked_e2e(path: Path):
    assert "e2e" in marks_of(ast.parse(path.read_text())), f"tests/e2e/{path.name}: pytestmark lacks pytest.mark.e2e"


@pytest.mark.parametrize("path", modules("unit"), ids=lambda path: path.name)
def test_no_unit_module_starts_etcd_or_locust(path: Path):
    tree = ast.parse(path.read_text())
    assert not marks_of(tree) & {"e2e", "slow"}, path.name
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not imported & PROCESS_HELPERS, f"tests/unit/{path.name} imports {imported & PROCESS_HELPERS}"
    arguments = {arg.arg for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for arg in node.args.args}
    assert not arguments & PROCESS_FIXTURES, f"tests/unit/{path.name} asks for {arguments & PROCESS_FIXTURES}"
