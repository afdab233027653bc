"""The package structure: every module imports on its own, no import cycles, layers respected.

Layers, lowest first: robots -> sim -> the embodied library -> the commands
(embodied.commands, embodied.cli). A module imports only from its own layer or
below, and never in a circle: imports inside functions count too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("robots", "sim", "embodied")
APP = ("embodied.commands", "embodied.cli")
# Loaded once before the children fork, to keep the test to seconds: none of them imports
# robots, sim or embodied, so each child still imports our modules from a clean slate.
THIRD_PARTY = ("torch", "numpy", "mujoco", "omegaconf", "hydra", "gymnasium", "matplotlib",
               "matplotlib.pyplot", "cv2", "pyarrow", "pyarrow.parquet", "yaml", "tqdm",
               "stable_baselines3", "onnx", "onnxruntime")


def module_files(root: Path = REPO) -> dict[str, Path]:
    """Every module of the three packages: dotted name -> file."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ours that ``name`` imports anywhere in its file (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in modules}
    found.discard(name)
    return found


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    files = module_files(root)
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(name: str) -> int:
    """0 robots, 1 sim, 2 the embodied library, 3 the commands."""
    if any(name == a or name.startswith(a + ".") for a in APP):
        return 3
    return PACKAGES.index(name.split(".")[0])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import of a higher layer."""
    return [f"{a} -> {b}" for a, targets in sorted(graph.items()) for b in sorted(targets)
            if layer(b) > layer(a)]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_layers():
    bad = layer_violations(import_graph())
    assert not bad, ("imports against the layering robots -> sim -> embodied library -> "
                     "commands:\n" + "\n".join(bad))


def test_checks_catch_a_cycle_and_a_leak():
    graph = {"sim.a": {"sim.b"}, "sim.b": {"sim.a"}, "robots.x": {"sim.a"},
             "embodied.lib": {"embodied.commands.train"}, "embodied.commands.train": set()}
    assert cycles(graph) == [["sim.a", "sim.b"]]
    assert layer_violations(graph) == ["embodied.lib -> embodied.commands.train",
                                       "robots.x -> sim.a"]


CHILD = r"""
import importlib, json, os, sys
for lib in sys.argv[2:]:
    try:
        importlib.import_module(lib)
    except ImportError:  # an optional one: the modules that need it are skipped below
        pass
assert not [m for m in sys.modules if m.split(".")[0] in ("robots", "sim", "embodied")]
results, running = {}, {}  # running: child pid -> (module, read end of its pipe)


def collect():
    pid, _ = os.wait()
    name, r = running.pop(pid)
    with os.fdopen(r) as f:
        results[name] = json.loads(f.read() or '{"ok": false, "error": "child died"}')


for name in json.loads(sys.argv[1]):
    if len(running) >= (os.cpu_count() or 1):
        collect()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:  # whatever happens (a parent killed: no reader), the child never returns
            os.close(r)
            try:
                importlib.import_module(name)
                msg = {"ok": True}
            except ModuleNotFoundError as err:
                msg = {"ok": False, "missing": err.name, "error": repr(err)}
            except BaseException as err:
                msg = {"ok": False, "missing": None, "error": repr(err)}
            os.write(w, json.dumps(msg).encode()[:60000])  # within a pipe's buffer
        finally:
            os._exit(0)
    os.close(w)
    running[pid] = (name, r)
while running:
    collect()
print(json.dumps(results))
"""

# Optional dependencies (extras): a module that needs a missing one is skipped, not failed.
OPTIONAL = {"warp": "the gpu extra", "mujoco_warp": "the gpu extra",
            "transformers": "the vlm extra", "isaaclab": "the Isaac Lab environment",
            "rclpy": "the ros extra"}


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, dict]:
    """Each module imported first thing in a fresh interpreter state (a fork of a process
    that has loaded only third-party libraries; one fork per core at a time): module ->
    outcome."""
    names = sorted(module_files())
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(names), *THIRD_PARTY],
                         capture_output=True, text=True, cwd=REPO, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(module_files()))
def test_module_imports_on_its_own(fresh_imports, name):
    result = fresh_imports[name]
    missing = (result.get("missing") or "").split(".")[0]
    if not result["ok"] and missing in OPTIONAL:
        pytest.skip(f"{name} needs {missing} ({OPTIONAL[missing]}), not installed here")
    assert result["ok"], f"{name} does not import on its own: {result['error']}"
