"""The import graph of `gateway/` and `adapters/`, read from the source with `ast` (every
import statement, also those inside functions and under `if TYPE_CHECKING:`):

- no import cycles, between modules nor between packages (a package is one unit:
  `gateway.config` importing `gateway.options` and `gateway.options` importing
  `gateway.config._parse` is a loop even when no two modules import each other);
- the packages of `gateway/` keep the layer order that `docs/architecture.md` draws
  (its "Layers" table is read here): a package imports only from its own layer or below,
  and every package stands in the table;
- `gateway/spark/` is a library: it reaches none of `gateway.runtime`, `gateway.daemon`,
  `gateway.cli`, `gateway.commands`, directly or through another module;
- the core never imports an adapter: nothing under `gateway/` reaches `adapters` (the
  daemon finds them through the `xrgw.adapters` entry point);
- adapters import only the adapter's side of the core (`ADAPTER_MAY_IMPORT`), and what
  those import stays inside it, so loading an adapter never loads the engine or config.

Dynamic imports (`importlib.import_module`) are not seen. The synthetic graphs at the end
show that each check fails on the thing it forbids.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "adapters")

SPARK = "gateway.spark"
NOT_FOR_SPARK = ("gateway.runtime", "gateway.daemon", "gateway.cli", "gateway.commands")
CORE = "gateway"
ADAPTERS = ("adapters",)
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: What an adapter may import of the core: the contract it implements (`ports`), the record
#: it makes, the protocol facts it reads (`protocols`), the CloudEvents bindings of its
#: wire format -- and three leaf utilities that import nothing of the gateway beyond this
#: list, so an adapter shares their vocabulary without reaching anything above it:
#: `json` (the JSON type aliases every record field is typed with), `spec` (the option-spec
#: vocabulary an adapter's options are declared in: `Field`, durations, problems) and
#: `observability.logs` (structured log fields and the rate gate, so an adapter's log
#: lines read like the core's; the rest of `observability` is off limits).
ADAPTER_MAY_IMPORT = ("gateway.ports", "gateway.record", "gateway.protocols",
                      "gateway.cloudevents", "gateway.json", "gateway.spec",
                      "gateway.observability.logs")

@dataclass(frozen=True)
class Import:
    """One imported name, absolute: `import a.b` is `a.b`, `from a import b` is `a.b`
    (module `a.b` or name `b` of `a`), `from . import b` in package `p` is `p.b`."""

    name: str
    line: int


#: Module name -> what it imports.
Graph = Mapping[str, Sequence[Import]]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool) -> list[Import]:
    """Every import statement of a module, wherever it stands."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found += [Import(base if alias.name == "*" else f"{base}.{alias.name}", node.lineno)
                      for alias in node.names]
    return found


def read_graph(root: Path, packages: Sequence[str] = PACKAGES) -> dict[str, list[Import]]:
    graph: dict[str, list[Import]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            graph[name] = imports_of(path.read_text(encoding="utf-8"), name,
                                     path.name == "__init__.py")
    return graph


def resolve(name: str, graph: Graph) -> str | None:
    """The module an imported name loads: its longest prefix that is a module here."""
    while name and name not in graph:
        name = name.rpartition(".")[0]
    return name or None


def edges(module: str, graph: Graph) -> set[str]:
    return {target for i in graph[module]
            if (target := resolve(i.name, graph)) is not None and target != module}


def unit(module: str) -> str:
    """The package a module belongs to, as one unit of the package-level graph: the first
    two parts of its name (`gateway.config._load` -> `gateway.config`; a module at the
    root of `gateway/` is its own unit)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> dict[str, list[Import]]:
    """The graph of units: one unit imports another when one of its modules imports a
    module of the other (the line is that import's)."""
    units: dict[str, list[Import]] = {}
    for module in sorted(graph):
        own = units.setdefault(unit(module), [])
        for i in graph[module]:
            target = resolve(i.name, graph)
            if target is not None and unit(target) != unit(module):
                own.append(Import(unit(target), i.line))
    return units


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(edges(module, graph)):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component: list[str] = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def forbidden_paths(graph: Graph, importers: str, forbidden: Sequence[str]) -> Iterator[str]:
    """For each module under `importers`, the first import chain (through any module)
    that reaches a name under one of `forbidden`."""
    for start in sorted(m for m in graph if _within(m, importers)):
        paths = {start: [start]}
        todo = [start]
        while todo:
            module = todo.pop(0)
            hit = next((i for i in graph[module]
                        if any(_within(i.name, f) for f in forbidden)), None)
            if hit is not None:
                yield " -> ".join([*paths[module], f"{hit.name} (line {hit.line})"])
                break
            for target in sorted(edges(module, graph) - paths.keys()):
                paths[target] = [*paths[module], target]
                todo.append(target)


def read_layers(text: str) -> dict[str, int]:
    """`gateway.<name>` -> its layer, from the rows `| N what | `name`, `name` |` of the
    first table after "Layers, lowest first" on the architecture page."""
    layers: dict[str, int] = {}
    lines = text.partition("\nLayers, lowest first")[2].splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("|")), len(lines))
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        match = re.match(r"\|\s*(\d+)\b[^|]*\|(.*)\|\s*$", line)
        if match:
            for name in re.findall(r"`([a-z_]+)`", match[2]):
                layers[f"{CORE}.{name}"] = int(match[1])
    return layers


def layer_problems(graph: Graph, layers: Mapping[str, int]) -> Iterator[str]:
    """Packages of the core missing from the table, and imports that go up a layer."""
    units = package_graph(graph)
    for name in sorted(u for u in units if _within(u, CORE) and u != CORE):
        if name not in layers:
            yield f"{name} stands in no layer of docs/architecture.md"
    for name, imported in units.items():
        for i in imported:
            if name in layers and i.name in layers and layers[i.name] > layers[name]:
                yield (f"{name} (layer {layers[name]}) imports {i.name} "
                       f"(layer {layers[i.name]}), line {i.line}")


def adapter_imports(graph: Graph, allowed: Sequence[str] = ADAPTER_MAY_IMPORT,
                    ) -> dict[str, list[str]]:
    """Core modules that adapters import outside `allowed` -> the adapter modules that do."""
    found: dict[str, list[str]] = {}
    for module in sorted(m for m in graph if _within(m, ADAPTERS[0])):
        for i in graph[module]:
            target = resolve(i.name, graph)
            if (target is not None and _within(target, CORE) and target != CORE
                    and not any(_within(target, a) for a in allowed)):
                found.setdefault(target, []).append(module)
    return found


def outside(graph: Graph, allowed: Sequence[str]) -> Iterator[str]:
    """Imports by the modules under `allowed` of core modules outside it: what loading an
    allowed module would load besides."""
    for module in sorted(m for m in graph if any(_within(m, a) for a in allowed)):
        for i in graph[module]:
            target = resolve(i.name, graph)
            if (target is not None and _within(target, CORE) and target != CORE
                    and not any(_within(target, a) for a in allowed)):
                yield f"{module} -> {target} (line {i.line})"


# ---------------------------------------------------------------------- the real graph

@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    return read_graph(ROOT)


def test_the_graph_is_read_with_imports_inside_functions(graph):
    assert {"gateway.cli", "gateway.spark.kafka", "adapters.registry"} <= graph.keys()
    assert len(graph) > 100
    # `xrgw run` imports the daemon inside `execute`, so that `xrgw --help` does not.
    assert "gateway.daemon" in edges("gateway.commands.run", graph)


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_no_package_level_cycles(graph):
    assert cycles(package_graph(graph)) == []


def test_the_layers_of_the_architecture_page_hold(graph):
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert {"gateway.json", "gateway.record", "gateway.cli"} <= layers.keys()  # table read
    assert list(layer_problems(graph, layers)) == []


def test_adapters_import_only_the_adapter_side_of_the_core(graph):
    # No exceptions: the core hands adapters what they need of the config and the
    # definitions as a `gateway.ports.AdapterEndpoint` (`gateway.config.for_adapter`).
    assert adapter_imports(graph) == {}


def test_what_adapters_may_import_stays_on_their_side(graph):
    assert list(outside(graph, ADAPTER_MAY_IMPORT)) == []


def test_spark_is_a_library(graph):
    assert list(forbidden_paths(graph, SPARK, NOT_FOR_SPARK)) == []


def test_the_core_never_imports_an_adapter(graph):
    assert list(forbidden_paths(graph, CORE, ADAPTERS)) == []


# ---------------------------------------------------------------------- the checks can fail

def _graph_of(tmp_path: Path, files: Mapping[str, str]) -> dict[str, list[Import]]:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return read_graph(tmp_path, sorted({relative.split("/")[0] for relative in files}))


PKG = {"a/__init__.py": ""}


@pytest.mark.parametrize(("files", "cycle"), [
    pytest.param({**PKG, "a/x.py": "import a.y\n", "a/y.py": "import a.x\n"},
                 ["a.x", "a.y"], id="import"),
    pytest.param({**PKG, "a/x.py": "from a import y\n",
                  "a/y.py": "def late():\n    from a.x import thing\n"},
                 ["a.x", "a.y"], id="inside-a-function"),
    pytest.param({**PKG, "a/x.py": "from . import y\n", "a/y.py": "from .x import thing\n"},
                 ["a.x", "a.y"], id="relative"),
    pytest.param({**PKG, "a/x.py": "from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from a.y import T\n",
                  "a/y.py": "from a import x\n"},
                 ["a.x", "a.y"], id="type-checking"),
    pytest.param({**PKG, "a/x.py": "import a.y\n", "a/y.py": "import a.z\n",
                  "a/z.py": "from . import x\n"},
                 ["a.x", "a.y", "a.z"], id="three-long"),
])
def test_a_cycle_is_found(tmp_path, files, cycle):
    assert cycles(_graph_of(tmp_path, files)) == [cycle]


CORE_FILES = {"gateway/__init__.py": "", "gateway/spark/__init__.py": "",
              "gateway/runtime/__init__.py": "", "gateway/runtime/route.py": "",
              "gateway/helper.py": "", "adapters/__init__.py": "", "adapters/mqtt.py": ""}


@pytest.mark.parametrize(("files", "importers", "forbidden", "chain"), [
    pytest.param({**CORE_FILES, "gateway/spark/job.py": "from gateway.runtime import route\n"},
                 SPARK, NOT_FOR_SPARK,
                 "gateway.spark.job -> gateway.runtime.route (line 1)", id="spark-runtime"),
    pytest.param({**CORE_FILES, "gateway/spark/job.py": "import gateway.helper\n",
                  "gateway/helper.py": "def f():\n    from gateway import cli\n"},
                 SPARK, NOT_FOR_SPARK,
                 "gateway.spark.job -> gateway.helper -> gateway.cli (line 2)",
                 id="spark-cli-through-another-module"),
    pytest.param({**CORE_FILES, "gateway/spark/kafka.py": "from ..commands.spark import x\n"},
                 SPARK, NOT_FOR_SPARK,
                 "gateway.spark.kafka -> gateway.commands.spark.x (line 1)",
                 id="spark-commands-relative"),
    pytest.param({**CORE_FILES, "gateway/helper.py": "def f():\n    import adapters.mqtt\n"},
                 CORE, ADAPTERS, "gateway.helper -> adapters.mqtt (line 2)", id="core-adapter"),
    pytest.param({**CORE_FILES, "gateway/helper.py": "from adapters import registry\n"},
                 CORE, ADAPTERS, "gateway.helper -> adapters.registry (line 1)",
                 id="core-adapter-not-a-file"),
])
def test_a_forbidden_import_is_found(tmp_path, files, importers, forbidden, chain):
    assert chain in list(forbidden_paths(_graph_of(tmp_path, files), importers, forbidden))


def test_an_allowed_graph_passes(tmp_path):
    graph = _graph_of(tmp_path, {
        **CORE_FILES,
        "gateway/spark/job.py": "from gateway import helper\n",
        "gateway/runtime/route.py": "from gateway.helper import x\n",
        "adapters/mqtt.py": "from gateway.helper import x\n",
    })
    assert cycles(graph) == []
    assert list(forbidden_paths(graph, SPARK, NOT_FOR_SPARK)) == []
    assert list(forbidden_paths(graph, CORE, ADAPTERS)) == []


def test_a_package_level_cycle_is_found_where_no_modules_loop(tmp_path):
    graph = _graph_of(tmp_path, {
        "gateway/__init__.py": "", "gateway/config/__init__.py": "",
        "gateway/config/docs.py": "from gateway import options\n",
        "gateway/config/parse.py": "",
        "gateway/options.py": "from gateway.config.parse import parse\n",
    })
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["gateway.config", "gateway.options"]]


LAYERS_PAGE = """Some text.

Layers, lowest first:

| layer | packages |
|---|---|
| 1 vocabulary | `json` |
| 2 data | `record`, `runtime` |

Later text naming `spark` in a table:

| 3 x | `spark` |
"""


def test_the_layer_table_is_read_from_the_page():
    assert read_layers(LAYERS_PAGE) == {"gateway.json": 1, "gateway.record": 2,
                                        "gateway.runtime": 2}


@pytest.mark.parametrize(("files", "problem"), [
    pytest.param({"gateway/json.py": "from gateway import record\n"},
                 "gateway.json (layer 1) imports gateway.record (layer 2), line 1", id="upward"),
    pytest.param({"gateway/spark/__init__.py": ""},
                 "gateway.spark stands in no layer of docs/architecture.md", id="unplaced"),
])
def test_a_layer_problem_is_found(tmp_path, files, problem):
    graph = _graph_of(tmp_path, {"gateway/__init__.py": "", "gateway/json.py": "",
                                 "gateway/record.py": "from gateway import json\n",
                                 "gateway/runtime/__init__.py": "from gateway import record\n",
                                 **files})
    assert problem in list(layer_problems(graph, read_layers(LAYERS_PAGE)))


def test_an_allowed_layering_passes(tmp_path):
    graph = _graph_of(tmp_path, {"gateway/__init__.py": "", "gateway/json.py": "",
                                 "gateway/record.py": "from gateway import json, runtime\n",
                                 "gateway/runtime/__init__.py": "import gateway.json\n"})
    assert list(layer_problems(graph, read_layers(LAYERS_PAGE))) == []


ADAPTER_FILES = {"gateway/__init__.py": "", "gateway/ports/__init__.py": "",
                 "gateway/record.py": "", "gateway/config/__init__.py": "",
                 "gateway/observability/__init__.py": "", "gateway/observability/logs.py": "",
                 "gateway/observability/metrics.py": "", "adapters/__init__.py": ""}


@pytest.mark.parametrize(("adapter", "found"), [
    pytest.param("from gateway.config import EndpointConfig\n",
                 {"gateway.config": ["adapters.mqtt"]}, id="config"),
    pytest.param("def late():\n    from gateway.observability import metrics\n",
                 {"gateway.observability.metrics": ["adapters.mqtt"]},
                 id="a-module-beside-an-allowed-one"),
    pytest.param("from gateway.ports import Consumer\nfrom gateway.record import R\n"
                 "from gateway.observability.logs import fields\n", {}, id="allowed"),
])
def test_an_adapter_import_outside_the_list_is_found(tmp_path, adapter, found):
    graph = _graph_of(tmp_path, {**ADAPTER_FILES, "adapters/mqtt.py": adapter})
    assert adapter_imports(graph) == found


def test_an_allowed_module_that_reaches_beyond_the_list_is_found(tmp_path):
    graph = _graph_of(tmp_path, {**ADAPTER_FILES,
                                 "gateway/record.py": "from gateway.config import x\n"})
    assert list(outside(graph, ADAPTER_MAY_IMPORT)) == [
        "gateway.record -> gateway.config (line 1)"]

