"""The proxy's read side: search, query and count (``service``), their checks (``check``),
reusable search plans (``plan``), full-text search (``text``), hybrid search (``hybrid``),
read plans for snapshot reads (``readplan``) and output fields (``outputs``)."""
