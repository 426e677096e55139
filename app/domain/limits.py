"""Size limits shared by the executor (which captures a task's output) and the store (which
stores it). Pure constants: the executor's zygote imports this, so nothing heavy is imported here.
"""

from __future__ import annotations

# The most characters of a task's output (and of its error text) that leave the executor and
# are stored on the execution and attempt rows, truncation marker included.
OUTPUT_LIMIT_CHARS = 20_000
