"""Repository rules that are about the code's shape, not its behaviour: no module over 600
lines, and every module of ``elanus/`` is classified by the layering contracts (so a new
shared module cannot slip past the "no I/O" and "no role package" checks)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
HARD_MAX_LINES = 800
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_dirs() -> list[Path]:
    return [ROOT / d for d in CONFIG["tool"]["setuptools"]["package-dir"].values()]


def _contract(name_start: str) -> dict:
    (found,) = [
        c for c in CONFIG["tool"]["importlinter"]["contracts"] if c["name"].startswith(name_start)
    ]
    return found


def test_no_module_over_600_lines_unless_it_says_why() -> None:
    """Split by concept, not line count: a module may pass 600 lines when one concept
    needs it and its docstring says why ("Past 600 lines: ..."); none passes 800."""
    too_long = {}
    for directory in _package_dirs():
        for path in sorted(directory.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            n = len(text.splitlines())
            said = "Past 600 lines:" in (ast.get_docstring(ast.parse(text)) or "")
            if n > HARD_MAX_LINES or (n > MAX_LINES and not said):
                too_long[str(path.relative_to(ROOT))] = n
    assert too_long == {}, (
        f"modules over {MAX_LINES} lines without a reason in their docstring, or over "
        f"{HARD_MAX_LINES}: split them along a seam"
    )


def test_every_shared_module_is_under_the_contracts() -> None:
    """The shared modules' contract lists every module (or sub-package) of ``elanus/``;
    the pure ones are those not named as doing local-file I/O."""
    shared_dir = ROOT / CONFIG["tool"]["setuptools"]["package-dir"]["elanus"]
    present = {
        f"elanus.{p.stem if p.is_file() else p.name}"
        for p in shared_dir.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    # the client SDK is a package of its own under its own contract (network I/O, no roles)
    assert _contract("The client SDK")["source_modules"] == ["elanus.client"]
    present.discard("elanus.client")
    # so are the role APIs (they reach the bus)
    assert _contract("Role APIs")["source_modules"] == ["elanus.api"]
    present.discard("elanus.api")
    shared = set(_contract("Shared modules of elanus/")["source_modules"])
    pure = set(_contract("Pure shared modules do no I/O")["source_modules"])
    assert shared == present
    assert shared - pure == {
        "elanus.settings",
        "elanus.importroots",
        "elanus.filereaders",
        "elanus.objstore",  # the storage root (local or S3): every role's file I/O
        "elanus.wire",  # the wire codec's TLS part reads the PEM files it is given
    }


def test_folders_by_role_are_under_the_contracts() -> None:
    """Every module of the index library is held off the bus (only ``indexnode`` is a role),
    and segments/ holds its two nodes and their shared storage as packages of their own."""
    library = {
        f"elanus.index.{p.stem}"
        for p in (ROOT / "index").glob("*.py")
        if p.stem not in ("__init__", "indexnode")
    }
    assert set(_contract("The index library")["source_modules"]) == library
    nodes = set(_contract("The data node and the query node")["modules"])
    assert nodes == {"elanus.segments.datanode", "elanus.segments.querynode"}
    loose = sorted(p.name for p in (ROOT / "segments").glob("*.py") if p.stem != "__init__")
    assert loose == [], "a segments/ module belongs to datanode/, querynode/ or storage/"


SEARCH_DIR = ROOT / "flight" / "search"


def _private_reaches(tree: ast.Module) -> list[str]:
    """``x._name`` where ``x`` is not ``self``/``cls``, and ``from ... import _name``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            found += [
                f"line {node.lineno}: import {a.name}" for a in node.names if _is_private(a.name)
            ]
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_search_modules_call_no_private_names_of_others() -> None:
    """The proxy's read side (``flight/search/``) works through public names only: a
    module uses its own private names, never another object's or module's. So do the
    delegator's snapshot reads (``segments/querynode/snapshot_read.py``)."""
    paths = [*sorted(SEARCH_DIR.glob("*.py")), ROOT / "segments" / "querynode" / "snapshot_read.py"]
    reaches = {
        path.name: found
        for path in paths
        if (found := _private_reaches(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert reaches == {}, "make the method public (and documented) or keep it in its module"


def test_the_proxy_uses_the_search_package_through_its_interface() -> None:
    """The rest of ``flight/`` (its sub-packages too) imports ``elanus.flight.search``
    itself, never its modules."""
    inside = {}
    for path in sorted((ROOT / "flight").rglob("*.py")):
        if SEARCH_DIR in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "elanus.flight.search."
            ):
                inside.setdefault(path.name, []).append(node.module)
    assert inside == {}


def test_coord_services_hold_no_coord() -> None:
    """The coord's services reach each other through ``meta/interfaces.py``, given to their
    constructors in ``meta/coord.py``; only that module may name ``self.coord``."""
    holders = {
        path.name
        for path in sorted((ROOT / "meta").glob("*.py"))
        if path.name != "coord.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr == "coord"
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    assert holders == set(), "pass the service an interface (meta/interfaces.py), not the coord"


FLIGHT_DIR = ROOT / "flight"
GIVEN_PORTS = [
    *sorted(SEARCH_DIR.glob("*.py")),
    FLIGHT_DIR / "ports.py",
    FLIGHT_DIR / "loads.py",
    FLIGHT_DIR / "dbgate.py",
    FLIGHT_DIR / "imports.py",
    FLIGHT_DIR / "snapshots.py",
    *sorted((FLIGHT_DIR / "sql").glob("*.py")),
    FLIGHT_DIR / "query_actions.py",
    FLIGHT_DIR / "dml.py",
    FLIGHT_DIR / "threadwrite.py",
    FLIGHT_DIR / "putpipeline.py",
    FLIGHT_DIR / "putcommand.py",
    FLIGHT_DIR / "registry.py",
    FLIGHT_DIR / "actions.py",
]
"""The proxy's services that are given narrow interfaces (``flight/ports.py``, or a Protocol
of their own: ``dml.WriteHost``, ``actions.ActionHost``) instead of the proxy object: the
read side, the write path and the action registry. Only the executors (``*_actions``,
through ``flight/executors.py``) get the proxy itself."""


def _imported(tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports, at any depth: ``if TYPE_CHECKING:`` and function
    bodies included."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_services_given_ports_never_import_the_proxy() -> None:
    """A converted service never names ``elanus.flight.proxy``, not even for typing: the
    proxy's module imports its services, never the other way round (no cycle hidden
    behind ``TYPE_CHECKING``). Nor does it hold the proxy (``self.proxy``)."""
    offenders = {}
    for path in GIVEN_PORTS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = sorted(
            n
            for n in _imported(tree)
            if n == "elanus.flight.proxy" or n.startswith("elanus.flight.proxy.")
        )
        found += [
            f"line {node.lineno}: self.proxy"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "proxy"
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ]
        if found:
            offenders[path.name] = found
    assert offenders == {}, "give the service what it uses (flight/ports.py), not the proxy"


def test_the_port_list_names_real_files() -> None:
    assert all(path.is_file() for path in GIVEN_PORTS)
    assert len(GIVEN_PORTS) > 3
