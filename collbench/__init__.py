"""collbench: collective-communication benchmarks comparable to nccl-tests.

The method, in full: docs/architecture.md#collbench-init-py.
"""

__version__ = "0.1.0"
