"""Bytes <-> columns, sans-I/O. Importing the package first stamps numba's cache of its kernels with the whole
codec's sources (``kernel_cache``), before any kernel is defined."""
from rocketstore_spark.codec import kernel_cache

kernel_cache.install()
