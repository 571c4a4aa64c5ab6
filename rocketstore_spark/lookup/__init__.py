"""Finding messages in a store without scanning it all: point lookups in ConsumeQueue files (``queue_files``),
queries by physical offset, msgId, queue offset, key and topic (``query``), and the export of a slice of the
CommitLog to Parquet, JSON lines or Delta (``export``). Read-only; for the driver, the CLI and notebooks."""
