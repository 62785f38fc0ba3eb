"""The data node (Milvus's datanode): consumes DML channels into segments through
``segments/flushcommon``, imports files, and writes the segments compactions plan."""
