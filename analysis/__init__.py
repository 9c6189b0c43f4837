"""Pure analysis code (no torch.distributed, no I/O): figures in, data out.

The method, in full: docs/architecture.md#analysis-init-py.
"""
