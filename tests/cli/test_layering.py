"""The layers: a core without Typer or Rich under a thin command line, and a fast ``--help``.

Everything outside ``ckptctl/cli/`` is the core: it takes and returns data (and a ``progress``
callable at most), so it is usable as a library and testable without a terminal. Only the CLI
knows about Typer, Click and Rich. ``ckptctl --help`` imports neither Rich nor the heavy data
libraries: they load inside the commands that need them.
"""

from __future__ import annotations

import ast
import functools
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


def test_the_cli_gives_arrow_the_system_allocator_unless_told_otherwise() -> None:
    """PyArrow's mimalloc keeps the pages of freed batches: the in-process gc plan of 1M files
    peaked 19 MiB higher with it. The CLI chooses the C allocator before PyArrow loads; a user's
    own ARROW_DEFAULT_MEMORY_POOL wins; and once PyArrow is loaded nothing is changed."""
    code = (
        "import sys\n"
        "from ckptctl.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import pyarrow as pa\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), os.environ.get("PYTHONPATH")]))

    def backend(**extra: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**env, **extra})  # fmt: skip
        return done.stdout.split()[-1]

    assert backend() == "system"
    assert backend(ARROW_DEFAULT_MEMORY_POOL="mimalloc") == "mimalloc"
    late = code.replace("from ckptctl.cli import main\n", "import pyarrow\nfrom ckptctl.cli import main\n")
    done = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split()[-1] != "system"


# ---------------------------------------------------------------------------------------------
# the import graph: no cycles between modules


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def module_imports(name: str, lazy: bool = False) -> set[str]:
    """The ckptctl modules ``name`` imports when it is imported (``lazy``: also inside functions).

    ``from P import X`` is an edge to the module ``P.X`` when X is a module, else to ``P``. Imports
    under ``if TYPE_CHECKING:`` never run. A package's own ``__init__``, which Python runs before
    any of its modules, is not an edge: only what a module names."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import) and (lazy or not inside):
                found.update(a.name for a in child.names if a.name in MODULES)
            elif isinstance(child, ast.ImportFrom) and (lazy or not inside):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(
                        parts[: len(parts) - child.level + 1] + ([child.module] if child.module else [])
                    )
                for a in child.names:
                    if f"{base}.{a.name}" in MODULES:
                        found.add(f"{base}.{a.name}")
                    elif base in MODULES:
                        found.add(base)
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    found.discard(name)
    return found


def import_graph(lazy: bool = False) -> dict[str, frozenset[str]]:
    """Every module's imports, read once per run and kind: six tests each parsed every module of
    the package again (~1.5 CPU-s a test); the files do not change during a run."""
    return dict(_import_graph(lazy))


@functools.cache
def _import_graph(lazy: bool) -> dict[str, frozenset[str]]:
    return {m: frozenset(module_imports(m, lazy)) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


# Cycles through imports inside functions (loaded lazily, but still a cycle between the modules):
# known ones only.
KNOWN_LAZY_CYCLES: list[list[str]] = []


def test_the_import_graph_is_read() -> None:
    graph = import_graph()
    assert len(graph) > 40
    assert "ckptctl.checkpoint.flink39964" in graph["ckptctl.repair"]
    assert "ckptctl.cli.base" in graph["ckptctl.cli.ls"]
    assert "ckptctl.verify.run" in graph["ckptctl.verify"]
    assert "ckptctl.storage" in graph["ckptctl.relocate.plan"]  # from ckptctl import storage as st
    assert "ckptctl.cli.output" not in graph["ckptctl.cli.session"]  # imported inside a method


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_lazy_imports_hide_no_new_cycle() -> None:
    assert cycles(import_graph(lazy=True)) == KNOWN_LAZY_CYCLES


def test_command_modules_import_the_base_not_the_cli_package() -> None:
    """The package imports the command modules (they register their commands); they take the
    app and what they share from ``ckptctl.cli.base``, which imports none of them."""
    graph = import_graph(lazy=True)
    commands = {m for m in graph["ckptctl.cli"] if m.startswith("ckptctl.cli.")} - {"ckptctl.cli.base"}
    assert {"ckptctl.cli.ls", "ckptctl.cli.verify", "ckptctl.cli.gc"} <= commands
    assert {m for m in commands if "ckptctl.cli" in graph[m]} == set()
    assert {m for m in commands if "ckptctl.cli.base" not in graph[m]} == set()
    assert not graph["ckptctl.cli.base"] & commands


def test_the_flink39964_diagnosis_is_core_below_its_users() -> None:
    """One module diagnoses FLINK-39964; it needs none of repair, verify, check or the CLI."""
    graph = import_graph(lazy=True)
    seen: set[str] = set()
    todo = ["ckptctl.checkpoint.flink39964"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    users = {
        "ckptctl.repair",
        "ckptctl.check",
        "ckptctl.relocate.plan",
        "ckptctl.inspect.diff",
        "ckptctl.cli",
    }
    assert not seen & users
    assert not any(m.startswith(("ckptctl.verify", "ckptctl.cli.")) for m in seen)
    for user in (
        "ckptctl.repair",
        "ckptctl.check",
        "ckptctl.relocate.plan",
        "ckptctl.inspect.diff",
        "ckptctl.verify.result",
    ):
        assert "ckptctl.checkpoint.flink39964" in graph[user], user


def test_verify_does_not_import_repair() -> None:
    graph = import_graph(lazy=True)
    verify = [m for m in MODULES if m == "ckptctl.verify" or m.startswith("ckptctl.verify.")]
    assert {m for m in verify if "ckptctl.repair" in graph[m]} == set()
