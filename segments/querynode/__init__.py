"""The query node (Milvus's querynodev2): each channel's delegator, the workers that hold
sealed segments, growing segments, and snapshot reads for bulk readers (Spark)."""
