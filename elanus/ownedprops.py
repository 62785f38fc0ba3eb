"""Settings that belong to one field or one index but live among the collection's
properties, keyed ``<prefix><owner>.<key>`` and hidden from the collection's own:
``elanus.fieldprops`` and ``elanus.indexprops`` keep theirs the same way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MMAP = "mmap.enabled"


def canonical(key: str) -> str:
    """Milvus's older spelling ``mmap_enabled`` is the same key."""
    return MMAP if key == "mmap_enabled" else key


@dataclass(frozen=True)
class OwnedKeys:
    """The keys one kind of owner (a field by name, an index by id) keeps."""

    prefix: str
    keys: frozenset[str]

    def stored_key(self, owner: str | int, key: str) -> str:
        return f"{self.prefix}{owner}.{key}"

    def is_stored_key(self, key: str) -> bool:
        """Whether a collection property is one owner's setting."""
        return key.startswith(self.prefix) and any(key.endswith(f".{k}") for k in self.keys)

    def of(self, properties: Mapping[str, str], owner: str | int) -> dict[str, str]:
        """The settings stored for ``owner``, by their Milvus key."""
        return {
            k: v for k in self.keys if (v := properties.get(self.stored_key(owner, k))) is not None
        }
