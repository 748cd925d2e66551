"""The runner package's floor plan: install/ and observe/ never import run/ (docs/development.md, "Runner:
where things live"). Read from the source files, so an import anywhere in a module counts, a lazy one too."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "runner" / "pgsql_broker"


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved against its package)."""
    package = ["pgsql_broker", *path.relative_to(PACKAGE).parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from . import run`
    return found


def run_imports(path: Path) -> list[str]:
    return sorted(m for m in imported_modules(path) if m == "pgsql_broker.run" or m.startswith("pgsql_broker.run."))


@pytest.mark.parametrize("folder", ["install", "observe", "tasks"])
def test_folder_never_imports_run(folder):
    files = sorted((PACKAGE / folder).glob("*.py"))
    assert files, f"no modules in {folder}/"
    offenders = {str(f.relative_to(PACKAGE)): run_imports(f) for f in files if run_imports(f)}
    assert offenders == {}, f"{folder}/ must not import run/: {offenders}"


def test_the_check_sees_an_import_of_run(tmp_path):
    """The check itself: each spelling of an import of run/ is found (else the tests above could not fail)."""
    sample = PACKAGE / "observe" / "_layout_probe.py"
    spellings = ["from ..run import queries", "from ..run.worker import QueueWorker", "from .. import run",
                 "import pgsql_broker.run.database", "def f():\n    from pgsql_broker.run import stopping"]
    try:
        for text in spellings:
            sample.write_text(text + "\n")
            assert run_imports(sample), text
        sample.write_text("from ..states import JobState\nfrom .logs import cap_text\n")
        assert run_imports(sample) == []
    finally:
        sample.unlink(missing_ok=True)
