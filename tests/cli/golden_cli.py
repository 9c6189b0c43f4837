"""A fixed script of CLI commands whose output is kept as golden files (tests/cli/golden/).

The restructure moved code between modules; these outputs pin that behaviour did not move
with it. Record them anew only for a change meant to alter output:

    python -m tests.cli.golden_cli --regold

and say in the commit why each changed file changed. The commands run in this process
(tests.helpers.collbench); COLLBENCH_TESTS_IN_PROCESS=0 runs each as a real process.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from collbench.core.knobs import OWN_ENV_VAR
from tests.helpers import collbench

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"

# (name, argv); "{tmp}" is a fresh directory shared by the whole script, in order.
CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "import-a",
        ("import", "nccl-tests", str(FIXTURES / "legacy_all_reduce_info.log"), "--out", "{tmp}/a"),
    ),
    (
        "import-b",
        ("import", "nccl-tests", str(FIXTURES / "rccl_hipevt_all_reduce.log"), "--out", "{tmp}/b"),
    ),
    (
        "import-c",
        (
            "import",
            "nccl-tests",
            str(FIXTURES / "current_all_gather_2node.log"),
            "--out",
            "{tmp}/c",
        ),
    ),
    ("fit-c", ("fit", "{tmp}/c")),
    ("fit-c-topology", ("fit", "{tmp}/c", "--topology", "dgx-h100")),
    ("files-a", ("@files", "{tmp}/a")),
    ("fit-a", ("fit", "{tmp}/a")),
    ("fit-a-json", ("fit", "{tmp}/a", "--json")),
    ("fit-b-predict", ("fit", "{tmp}/b", "--predict", "3M,48M")),
    (
        "import-d",
        (
            "import",
            "nccl-tests",
            str(FIXTURES / "legacy_errors_all_reduce_2gpu.log"),
            "--out",
            "{tmp}/d",
        ),
    ),
    ("compare", ("compare", "{tmp}/b", "{tmp}/d")),
    ("compare-json", ("compare", "{tmp}/b", "{tmp}/d", "--json")),
    (
        "mfu-llama",
        (
            "mfu",
            "-T",
            "dgx-h100",
            "-T",
            "mi300x",
            "--model",
            "llama3-70b",
            "--seq",
            "8192",
            "--global-batch",
            "512",
            "--tp",
            "8",
            "--pp",
            "4",
            "--dp",
            "16",
            "--sequence-parallel",
            "--recompute",
            "selective",
        ),
    ),
    (
        "mfu-gpt3-json",
        (
            "mfu",
            "-T",
            "dgx-a100",
            "-T",
            "gb200-nvl72",
            "--model",
            "gpt3-175b",
            "--seq",
            "2048",
            "--global-batch",
            "1536",
            "--tp",
            "8",
            "--pp",
            "8",
            "--nodes",
            "192",
            "--recompute",
            "selective",
            "--sequence-parallel",
            "--json",
        ),
    ),
    (
        "predict-catalog",
        ("predict", "-T", "dgx-h100", "-T", "mi300x", "-c", "all_reduce", "-b", "1M", "-e", "8G"),
    ),
    ("topo-show", ("topo", "show", "dgx-h100")),
    ("topo-list", ("topo", "list")),
    (
        "sweep-print",
        (
            "sweep",
            "--launcher",
            "local",
            "--nproc",
            "2",
            "-c",
            "all_reduce",
            "-b",
            "1K",
            "-e",
            "1M",
            "--print",
            "--out",
            "{tmp}/sweep",
        ),
    ),
)

_NOISE = (
    (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}"), "<RUN_ID>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?"), "<UTC>"),
    (re.compile(r"(--master-port[ =]|MASTER_PORT=|:)\d{4,5}\b"), r"\1<PORT>"),
    (re.compile(r"(COLLBENCH_PARENT_PID=)\d+"), r"\1<PID>"),
)


def run_case(argv: tuple[str, ...], tmp: Path) -> str:
    """One command's exit code, stdout and stderr, with paths and clocks normalized."""
    args = [arg.replace("{tmp}", str(tmp)) for arg in argv]
    if args[0] == "@files":  # what a run directory holds: the store's schema on disk
        run_dir = Path(args[1])
        text = "".join(
            f"# {name}\n{(run_dir / name).read_text(encoding='utf-8')}"
            for name in ("meta.json", "rows.jsonl")
        )
    else:
        done = collbench(*args)
        text = (
            f"$ collbench {' '.join(argv)}\n# exit {done.returncode}\n"
            f"# stdout\n{done.stdout}# stderr\n{done.stderr}"
        )
    text = text.replace(str(tmp), "{tmp}").replace(str(FIXTURES), "{fixtures}")
    text = text.replace(sys.executable, "{python}")
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text


def run_all() -> dict[str, str]:
    # The printed rank lines show what the launcher sets itself (OMP_NUM_THREADS) unless
    # the environment has it: an earlier in-process test's --knob may have left it there.
    saved = {name: os.environ.pop(name, None) for name in ("OMP_NUM_THREADS", OWN_ENV_VAR)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return {name: run_case(argv, Path(tmp)) for name, argv in CASES}
    finally:
        os.environ.update({name: value for name, value in saved.items() if value is not None})


def main() -> None:
    if sys.argv[1:] != ["--regold"]:
        sys.exit("usage: python -m tests.cli.golden_cli --regold")
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name, text in run_all().items():
        (GOLDEN_DIR / f"{name}.txt").write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN_DIR / name}.txt")


if __name__ == "__main__":
    main()
