"""Rebuilding derived store files (ConsumeQueues, IndexFiles) from the CommitLog, byte for byte as RocketMQ
writes them, into a directory outside the store (docs/format/consumequeue.md, docs/format/indexfile.md)."""
