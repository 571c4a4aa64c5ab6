"""The bounds-checked mode of the compiled codec, for tests: ``ROCKETSTORE_CHECKED=1`` in the environment, read
once, when the codec is imported.

In this mode every write into a batch's arena — by the batch writer, the property and host kernels, the body
copies — is checked against the region it belongs to, and a write outside raises IndexError ("bounds-checked
mode: ...") where normal mode would corrupt memory: array indexing through numba's ``boundscheck`` (the kernels
that write take ``boundscheck=CHECKED``), writes by address through ``native.check_write`` (``native.copy_at``,
``native.store_le64``, the writer's ``memcpy``). The test suite and the mutation campaign run in it
(``tests/fuzz/test_checked_mode.py``); it costs speed, so readers never do. In normal mode ``CHECKED`` is a
constant False that numba folds: the checks compile to nothing. The modes' compiled kernels are cached apart
(``kernel_cache`` stamps the mode). Pure Python; imported wherever the codec is.
"""
from __future__ import annotations

import os

ENV = "ROCKETSTORE_CHECKED"
CHECKED = os.environ.get(ENV, "") == "1"
