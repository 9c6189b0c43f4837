"""collbench: collective-communication benchmarks comparable to nccl-tests."""

__version__ = "0.1.0"
