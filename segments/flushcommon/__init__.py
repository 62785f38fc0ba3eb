"""A datanode's write path, split as in Milvus's ``internal/flushcommon``.

- ``pipeline``: consumes one vchannel in packs between ticks, buffers them, reports the
  tick to the coord and hands what is due to the syncs; never waits for a write;
- ``writebuffer``: what is consumed but not yet on disk (rows of growing segments, deletes
  of flushed ones) and the policies that pick what to sync; no I/O;
- ``syncpack``: one sync's writes (rows, pk stats, delta logs), each safe to repeat;
- ``syncmgr``: runs syncs off the consumption path, per-segment ordered, a bounded number
  at once, and knows the oldest stream position not yet synced;
- ``flusher``: turns the buffer's due content into syncs (spills, delta logs, flushes)
  and reports flushed segments; ``compaction``: runs the coord's compaction plans;
- ``coordreport``: the reports to the coord.

``segments.channel_writer.ChannelWriter`` assembles them for one vchannel.
"""
