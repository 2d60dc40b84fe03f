"""The package's shape: no import cycles, each program imports only what it needs, and no
module or class past its size.

The whole house is checked: the service (``app``) and the test harness (``harness``: the fake
upstream, the proxies, the clients). Imports are read from the source (every
``import``/``from`` of an ``app`` or ``harness`` module, at module level or inside a function,
except under ``if TYPE_CHECKING:``), so a cycle hidden in a function body counts: it is still
a knot a reader has to untie.

The same rule holds one level up, between folders, so that the folders say who depends on
whom: a folder is a top-level package under ``app/`` or ``harness/`` (``app.refresher`` with
everything below it, ``harness.fake_polymarket``); a top-level module (``app.web``,
``harness.proxy``) and the package roots ``app`` and ``harness`` are nodes of their own, as
folders of one module.

And one rule of wiring: only the views (``app.api``), the operator commands
(``app.commands``) and the app factory (``app.web``) read the app's service container; every
other module gets what it needs from the factory.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "app"
HARNESS = ROOT / "harness"
# Every package the structure checks cover (imports between them count, as within each).
PACKAGES = (PACKAGE, HARNESS)
TOP_LEVEL = frozenset(package.name for package in PACKAGES)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_from(node: ast.ImportFrom, this: str, is_package: bool) -> str:
    """The absolute name of the module ``from ... import`` reads, in module ``this``."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = this if is_package else this.rpartition(".")[0]
    for _ in range(node.level - 1):
        anchor = anchor.rpartition(".")[0]
    return f"{anchor}.{base}" if base else anchor


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``PACKAGES`` that ``path`` imports (a package import counts as its
    ``__init__``)."""
    tree = ast.parse(path.read_text(), str(path))
    this = _module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != this:
            found.add(name)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in TOP_LEVEL:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, this, is_package)
            if base.split(".")[0] in TOP_LEVEL:
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every module of ``PACKAGES`` and the modules of ``PACKAGES`` it imports."""
    paths = sorted(path for package in PACKAGES for path in package.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check can fail: a made-up graph with a knot is reported."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycles() -> None:
    """No module of ``app`` or ``harness`` reaches itself through its imports."""
    graph = import_graph()
    assert graph.get("app.web"), "the graph was not read"
    assert graph.get("harness.fake_polymarket.world"), "the harness was not read"
    assert cycles(graph) == []


def folder_of(module: str) -> str:
    """The folder ``module`` lives in: its top-level package under ``app`` or ``harness``, or
    itself."""
    return ".".join(module.split(".")[:2])


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen between folders: each folder and the other folders it imports."""
    folders: dict[str, set[str]] = {folder_of(module): set() for module in graph}
    for module, targets in graph.items():
        folders[folder_of(module)] |= {folder_of(t) for t in targets} - {folder_of(module)}
    return folders


def _knot(graph: dict[str, set[str]], members: list[str]) -> str:
    """The module imports that tie the folders ``members`` together, one a line."""
    return "\n".join(
        f"  {module} -> {target}"
        for module in sorted(graph)
        for target in sorted(graph[module])
        if folder_of(module) in members
        and folder_of(target) in members
        and folder_of(target) != folder_of(module)
    )


def test_the_folder_cycle_finder_finds_a_cycle_between_folders() -> None:
    """Two folders importing each other through different modules: no module cycle, one knot."""
    graph = {"app.a.x": {"app.b.y"}, "app.b.z": {"app.a.w"}, "app.a.w": set(), "app.b.y": set()}
    assert cycles(graph) == []
    assert cycles(folder_graph(graph)) == [["app.a", "app.b"]]
    assert _knot(graph, ["app.a", "app.b"]) == "  app.a.x -> app.b.y\n  app.b.z -> app.a.w"


def test_the_folders_have_no_import_cycles() -> None:
    """No folder of ``app`` or ``harness`` reaches itself through its imports: each knot is
    named, with the module imports that tie it."""
    graph = import_graph()
    folders = folder_graph(graph)
    assert folders.get("app.web"), "the graph was not read"
    assert "app.markets" in folders.get("harness.fake_polymarket", set()), "no harness edges"
    knots = [f"{', '.join(members)}:\n{_knot(graph, members)}" for members in cycles(folders)]
    assert not knots, "import cycles between folders:\n" + "\n".join(knots)


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


HEAVY = {"flask", "limits", "flask_sqlalchemy", "flask_migrate", "sqlalchemy", "alembic"}


def test_the_package_root_and_the_config_import_nothing_heavy() -> None:
    """``import app`` and ``import app.config`` (gunicorn.conf.py) load no framework."""
    assert not HEAVY & _loaded_after("import app.config")


def test_the_refresher_program_loads_no_web_framework() -> None:
    """The refresher's own program imports no Flask, no extension and no SQL store."""
    loaded = _loaded_after("import app.refresher.main, app.refresher.loop")
    assert "app.refresher.main" in loaded
    assert not (HEAVY | {"werkzeug", "gevent"}) & loaded, HEAVY & loaded


def test_the_backtest_program_loads_no_web_framework() -> None:
    """``python -m app.backtest`` replays on the live source alone: no Flask, no SQL, no Redis."""
    loaded = _loaded_after("import app.backtest.cli, app.backtest.report")
    assert "app.backtest.replay" in loaded
    assert not (HEAVY | {"werkzeug", "gevent", "redis"}) & loaded, HEAVY & loaded


# Who may read the app's service container (``app.services``'s ``services()`` and
# ``services_of()``): the views, the operator commands (each runs in an app context of its
# own) and the app factory that fills it. Every other module is handed what it needs by the
# factory, so a subsystem never reaches back into the app that holds it.
CONTAINER = "app.services"
CONTAINER_ACCESSORS = {"services", "services_of"}
CONTAINER_READERS = ("app.api", "app.commands", "app.web")


def container_reads(source: str, this: str, is_package: bool = False) -> set[str]:
    """What the module ``this`` (its ``source``) imports that reads the container: an
    accessor by name, or the whole module (through which it could call one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name == CONTAINER}
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, this, is_package)
            for alias in node.names:
                if base == CONTAINER and alias.name in CONTAINER_ACCESSORS:
                    found.add(f"{base}.{alias.name}")
                elif f"{base}.{alias.name}" == CONTAINER:
                    found.add(CONTAINER)
    return found


def test_the_container_read_finder_finds_every_form() -> None:
    """The check can fail: accessors by name, relative or inside a function, and the module."""
    assert container_reads("from app.services import Lifecycle, Services", "app.x") == set()
    assert container_reads("from app.services import services", "app.x") == {
        "app.services.services"
    }
    inside = "def f():\n    from ..services import services_of\n"
    assert container_reads(inside, "app.auth.usage") == {"app.services.services_of"}
    assert container_reads("from app import services", "app.x") == {CONTAINER}
    assert container_reads("import app.services", "app.x") == {CONTAINER}


def test_only_the_views_commands_and_factory_read_the_service_container() -> None:
    """No subsystem (auth, limits, stream, board, bus...) reaches back into the container."""
    readers: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module == CONTAINER:
            continue
        found = container_reads(path.read_text(), module, path.name == "__init__.py")
        if found:
            readers[module] = found
    assert any(m.startswith("app.api.") for m in readers), "the imports were not read"
    outside = {
        module: sorted(found)
        for module, found in readers.items()
        if not any(module == r or module.startswith(f"{r}.") for r in CONTAINER_READERS)
    }
    assert not outside, f"modules that read the service container: {outside}"


# -- sizes: every module a room, not a house (issue 38 for the live source, issue 47 for all) --

MAX_MODULE_LINES = 350
MAX_CLASS_LINES = 250


def oversized(source: str, where: str) -> list[str]:
    """What in ``source`` is over the limits: the module past ``MAX_MODULE_LINES``, a class
    (decorators, docstring and methods included) past ``MAX_CLASS_LINES``."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            span = node.end_lineno - start + 1
            if span > MAX_CLASS_LINES:
                found.append(f"{where}: class {node.name} of {span} lines")
    return found


def test_the_size_check_finds_a_long_module_and_a_long_class() -> None:
    """The check can fail: one line over each limit is found, and at the limit nothing is."""
    body = "    x = 1\n" * (MAX_CLASS_LINES - 1)
    assert oversized(f"class A:\n{body}", "m") == []
    assert oversized(f"class A:\n{body}    y = 2\n", "m") == ["m: class A of 251 lines"]
    assert oversized("x = 1\n" * MAX_MODULE_LINES, "m") == []
    assert oversized("x = 1\n" * (MAX_MODULE_LINES + 1), "m") == ["m: 351 lines"]


def test_no_module_of_the_package_or_the_harness_is_over_its_size() -> None:
    """No module of ``app`` or ``harness`` over 350 lines, no class over 250 (docs/code.md)."""
    modules = sorted(path for package in PACKAGES for path in package.rglob("*.py"))
    live_source = PACKAGE / "refresher" / "sources" / "polymarket" / "source.py"
    assert live_source in modules, "the package was not found"
    assert HARNESS / "fake_polymarket" / "world.py" in modules, "the harness was not found"
    found = [
        problem
        for path in modules
        for problem in oversized(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, f"too big: {found}"
