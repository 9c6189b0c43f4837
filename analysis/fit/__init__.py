"""Curve fits of a size sweep (pure): the alpha-beta fit (hockney), its regimes, how far it can
be trusted (quality), and measured rows against the cost model (vs_topology)."""
