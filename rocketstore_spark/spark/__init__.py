"""Everything that needs Spark beyond the data sources: the session helper (``session``), the Delta Lake JARs
(``jars``), how a job starts and ends (``entrypoint``), and the Spark jobs' work: verify over many stores
(``verify``) and the parallel rebuild (``rebuild``). Imported on the driver; the work they hand to executors
lives in the layers below."""
