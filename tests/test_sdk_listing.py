"""``Client``'s public API reads on one screen: the listing at the top of flight/client.py
names every public method under the mixin that defines it, and nothing else."""

from __future__ import annotations

import re

from elanus.flight import client
from elanus.flight.client import Client

INSTANCE_ATTRIBUTES = {"uri", "timeout"}


def _listing() -> dict[str, set[str]]:
    """Mixin class name -> the names listed under it."""
    text = re.sub(r"\s+", " ", client.__doc__ or "")
    out: dict[str, set[str]] = {}
    for mixin, names in re.findall(r"- [\w ]+ \(``client_\w+\.(\w+)``\): ([\w, ]+)", text):
        out[mixin] = {n.strip() for n in names.split(",")}
    return out


def _owner(name: str) -> str:
    return next(k.__name__ for k in Client.__mro__ if name in vars(k))


def test_the_client_listing_names_every_public_method_where_it_is_defined() -> None:
    listing = _listing()
    assert len(listing) >= 10
    listed = [n for names in listing.values() for n in names]
    assert len(listed) == len(set(listed)), "a name is listed twice"
    public = {n for n in dir(Client) if not n.startswith("_")}
    assert set(listed) == public | INSTANCE_ATTRIBUTES
    for mixin, names in listing.items():
        for name in names - INSTANCE_ATTRIBUTES:
            assert _owner(name) == mixin, f"{name} is defined in {_owner(name)}, not {mixin}"
    assert not [n for n in vars(Client) if not n.startswith("_")], "Client's body stays empty"
