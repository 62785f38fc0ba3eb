"""SQL over collections through Arrow Flight SQL, on the proxy's Flight port (docs/sql.md).

``service`` dispatches the Flight SQL calls; ``statement`` reads a statement's parse tree
(what it reads, its ``vector_search`` calls, its snapshot clause); ``snapshot`` picks its
timestamp; ``tables`` makes a collection a table (its rows through the read plan);
``vector_search`` runs indexed searches for it; ``catalog`` answers the catalog commands;
``execution`` runs it in a DuckDB of its own within the limits; ``handles`` carries state
between calls in the client's hands; ``options`` reads the call headers.

DuckDB runs here and nowhere else in the proxy (an import contract says so); the data it
reads comes as Arrow from the query nodes, never from a segment file.

``SqlService`` lives in ``service`` and is imported on the first SQL call, not here: DuckDB
costs a proxy ~35 ms to import, and most proxies never see a statement.
"""

from elanus.flight.sql.options import MIDDLEWARE_KEY, SqlHeadersFactory, options_of

__all__ = ["MIDDLEWARE_KEY", "SqlHeadersFactory", "options_of"]
