"""collbench: collective-communication benchmarks comparable to nccl-tests."""

from pathlib import Path as _Path

__version__ = "0.1.0"

# launchers/, analysis/ and topologies/ sit beside this package in the source tree and are
# mapped into it (collbench.launchers, ...) when installed. When this package is imported
# from a source checkout instead (python -m from the repository root puts the checkout
# first on sys.path, even if a copy is installed), look for those subpackages there too.
_ROOT = _Path(__file__).resolve().parent.parent
if (
    not (_Path(__file__).resolve().parent / "launchers").is_dir()
    and (_ROOT / "launchers" / "__init__.py").is_file()
    and (_ROOT / "pyproject.toml").is_file()
):
    __path__.append(str(_ROOT))  # noqa: F821 - a package's own __path__
