"""What operators read: text and tables rendered from results (driver side; no Spark needed)."""
