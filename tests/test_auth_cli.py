"""Authentication from the command line and the server's exposure guard, with real
``elanus`` processes; and docs/security.md's privilege table against the code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import StandaloneProcess, cli_env, run_elanus

from elanus.flight.actions import privilege_table
from elanus.privileges import OPEN, PRIVILEGES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "security.md"


def test_security_doc_lists_every_call_with_its_privilege() -> None:
    rows = re.findall(r"^\| `?([A-Za-z]+|\(any authenticated user\))`? \| (\w+|—) \| (.*) \|$",
                      DOCS.read_text(), re.M)  # fmt: skip
    documented: dict[str, str] = {}
    for privilege, kind, calls in rows:
        if kind != "—" and privilege in PRIVILEGES:
            assert PRIVILEGES[privilege].value == kind, privilege
        for action in re.findall(r"^`(\w+)`|, `(\w+)`", calls):
            name = next(a for a in action if a)
            documented[name] = OPEN if privilege.startswith("(") else privilege
    declared = privilege_table()
    assert {a: p for a, p in documented.items() if a in declared} == declared


def _elanus(sp: StandaloneProcess, *args: str, **env: str) -> Any:
    done = run_elanus("--uri", sp.uri, *args, env=cli_env(**env))
    return done


def test_cli_users_roles_and_credentials(tmp_path: Path, elanus_processes: Any) -> None:
    sp = StandaloneProcess(tmp_path / "data", "--auth", env={"ELANUS_ROOT_PASSWORD": "root-pw-cli"})
    elanus_processes(sp)
    sp.start().wait_ready()
    anonymous = _elanus(sp, "collection", "list")
    assert anonymous.returncode == 1
    assert "[UNAUTHENTICATED]" in anonymous.stderr
    root = {"ELANUS_TOKEN": "root:root-pw-cli"}
    made = _elanus(sp, "user", "create", "gina", ELANUS_NEW_PASSWORD="gina-pw-1", **root)
    assert made.returncode == 0, made.stderr
    for args in (
        ("role", "create", "reader"),
        ("role", "grant", "reader", "ShowCollections", "--object-type", "Global"),
        ("user", "bind", "gina", "reader"),
        ("collection", "create", "docs", "--dim", "4"),
    ):
        done = _elanus(sp, *args, **root)
        assert done.returncode == 0, (args, done.stderr)
    described = _elanus(sp, "--json", "role", "describe", "reader", **root)
    assert json.loads(described.stdout)["privileges"][0]["privilege"] == "ShowCollections"
    gina = {"ELANUS_USER": "gina", "ELANUS_PASSWORD": "gina-pw-1"}
    listed = _elanus(sp, "--json", "collection", "list", **gina)
    assert listed.returncode == 0, listed.stderr
    assert "docs" in listed.stdout
    denied = _elanus(sp, "collection", "drop", "docs", "--yes", **gina)
    assert denied.returncode == 1
    assert "[PERMISSION_DENIED]" in denied.stderr and "DropCollection" in denied.stderr
    who = _elanus(sp, "--json", "user", "whoami", **gina)
    assert json.loads(who.stdout) == {"user": "gina", "roles": ["reader"], "superuser": False}
    users = _elanus(sp, "--json", "user", "list", **root)
    assert json.loads(users.stdout) == ["gina", "root"]
    changed = _elanus(
        sp, "user", "passwd", "gina", ELANUS_OLD_PASSWORD="gina-pw-1",
        ELANUS_NEW_PASSWORD="gina-pw-2", **gina,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    stale = _elanus(sp, "collection", "list", **gina)
    assert stale.returncode == 1 and "[UNAUTHENTICATED]" in stale.stderr
    assert "gina-pw" not in stale.stderr  # no password echoed


@pytest.mark.slow
def test_standalone_refuses_an_open_non_loopback_address(tmp_path: Path) -> None:
    done = run_elanus(
        "standalone", "--data-dir", str(tmp_path / "d"), "--host", "0.0.0.0", "--port", "0",
        timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--insecure" in done.stderr and "authentication" in done.stderr
    assert not (tmp_path / "d" / "catalog.duckdb").exists()
