"""collbench: collective-communication benchmarks comparable to nccl-tests.

The package is arranged in layers that import one way only (pyproject.toml's import-linter
contract checks it): cli -> render -> run -> {launchers | analysis} -> bench -> store ->
topologies -> core. `launchers/`, `analysis/` and `topologies/` sit beside this folder in the
source tree and are installed as `collbench.launchers`, `collbench.analysis` and
`collbench.topologies`; from a source checkout, install it editable (`pip install -e .`).
"""

__version__ = "0.1.0"
