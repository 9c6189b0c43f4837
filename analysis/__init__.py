"""Pure analysis code (no torch.distributed, no I/O): bandwidth math, fits, models."""
