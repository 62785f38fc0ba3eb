"""What an action's executor gets: ``actions.Call`` carrying the proxy.

Only the concern modules (``*_actions``) import this, and nothing imports them but the
registry's ``catalogue`` (by name), so naming ``ProxyServer`` here closes no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from elanus.flight import actions
    from elanus.flight.proxy import ProxyServer

Call: TypeAlias = "actions.Call[ProxyServer]"
Executor: TypeAlias = "Callable[[Call], Any]"
