"""What every index directory a builder writes holds besides its data: a ``meta.json``
naming its kind, parameters and format version. The FAISS (``engine``) and sparse
(``sparse``) indexes share the version and the name, so neither imports the other for them.
"""

from __future__ import annotations

FORMAT_VERSION = 1
"""Bumped when an index's files change shape: a loader refuses other versions."""
META_FILE = "meta.json"
