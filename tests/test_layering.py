"""The layers: a core without Typer or Rich under a thin command line, and a fast ``--help``.

Everything outside ``ckptctl/cli/`` is the core: it takes and returns data (and a ``progress``
callable at most), so it is usable as a library and testable without a terminal. Only the CLI
knows about Typer, Click and Rich. ``ckptctl --help`` imports neither Rich nor the heavy data
libraries: they load inside the commands that need them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import ckptctl

PACKAGE = Path(ckptctl.__file__).resolve().parent
UI_MODULES = ("typer", "click", "rich")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (absolute names)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def core_files() -> list[Path]:
    """Everything but the CLI edge: ``cli/`` and ``__main__.py`` (``python -m ckptctl``, the entry
    point that only calls the CLI)."""
    return sorted(
        p for p in PACKAGE.rglob("*.py") if PACKAGE / "cli" not in p.parents and p != PACKAGE / "__main__.py"
    )


def test_the_core_imports_no_typer_rich_or_cli() -> None:
    files = core_files()
    assert len(files) > 20 and PACKAGE / "gc" / "plan.py" in files
    offenders = {
        str(path.relative_to(PACKAGE.parent)): sorted(
            m for m in imported_modules(path) if m.split(".")[0] in UI_MODULES or m.startswith("ckptctl.cli")
        )
        for path in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from ckptctl.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE.parent), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    loaded = set(done.stdout.split())
    assert "ckptctl" in loaded
    assert loaded.isdisjoint({"rich", "pyarrow", "s3fs", "fsspec", "pyspark", "rocksdict", "numpy"})
