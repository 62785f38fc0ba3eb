"""What an action's executor gets: ``actions.Call`` carrying the proxy.

Only the concern modules (``*_actions``) import this, and nothing imports them but the
registry's ``catalogue`` (by name), so naming ``ProxyServer`` here closes no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    from elanus.flight import actions
    from elanus.flight.proxy import ProxyServer

Q = TypeVar("Q")
Call: TypeAlias = "actions.Call[ProxyServer, Any]"
OpCall: TypeAlias = "actions.Call[ProxyServer, Q]"
"""The call of an action declared by an operation record: ``OpCall[CreatePartition]``."""
Executor: TypeAlias = "Callable[[Call], Any]"
