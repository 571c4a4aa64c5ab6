"""rocketstore-spark: read, verify, rebuild and recover Apache RocketMQ broker stores with Apache Spark.

Layers (each imports only from those below it):
    codec/       bytes <-> typed columns; pure, numpy/numba/pyarrow only
    store/       the store directory: discover segments, read byte ranges (read-only)
    datasource/  Spark Python DataSources over store/ + codec/
    session      the SparkSession helper (sources registered, Delta configured)
    jobs/, cli   entry points
"""
__version__ = "0.1.0"
