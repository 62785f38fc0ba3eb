"""``Client``'s public API reads on one screen: ``Client`` is its mixins and nothing else,
and its docstring lists every public method under the mixin (concern) that defines it."""

from __future__ import annotations

import re

from elanus.client import client
from elanus.client.client import Client


def _listing() -> dict[str, list[str]]:
    """Mixin name -> the names listed under it in ``Client.__doc__``."""
    out: dict[str, list[str]] = {}
    for mixin, names in re.findall(r"^- (\w+): ([\w, ]+)$", Client.__doc__ or "", re.M):
        out[mixin] = [n.strip() for n in names.split(",")]
    return out


def test_the_listing_names_every_public_method_once_under_its_mixin() -> None:
    listing = _listing()
    assert len(listing) >= 10
    listed = [n for names in listing.values() for n in names]
    assert len(listed) == len(set(listed)), "a name is listed twice"
    public = {n for n in dir(Client) if not n.startswith("_")}
    assert set(listed) == public
    for mixin, names in listing.items():
        for name in names:
            owner = next(k.__name__ for k in Client.__mro__ if name in vars(k))
            assert owner == mixin, f"{name} is defined in {owner}, not {mixin}"
    for expected in ("search", "insert", "create_index", "bulk_import", "grant_role"):
        assert expected in listed


def test_client_adds_nothing_of_its_own_and_every_mixin_is_named_by_concern() -> None:
    assert not [n for n in vars(Client) if not n.startswith("_")], "Client's body stays empty"
    module_doc = client.__doc__ or ""
    for mixin in _listing():
        assert mixin in module_doc, f"{mixin} is missing from elanus/client/client.py's concerns"
