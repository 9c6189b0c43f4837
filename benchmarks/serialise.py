"""Which serialisation library collbench uses (issue 37): the import cost each adds to
`collbench --help` and to every rank, and the time to convert a real result type,
store.doctor_report.DoctorReport, to builtins and back, against the hand-written code.

    python benchmarks/serialise.py               # 7 imports each, 3,000 conversions each
    python benchmarks/serialise.py --imports 15 --conversions 10000
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

LIBRARIES = ("msgspec", "cattrs", "pydantic")


def import_ms(module: str) -> float:
    """The cumulative import time of `module` in a fresh interpreter (-X importtime), ms."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    pattern = re.compile(rf"^import time:\s+\d+ \|\s+(\d+) \| {re.escape(module)}$", re.M)
    return int(pattern.search(result.stderr).group(1)) / 1000


def sample():
    from collbench.store.doctor_report import DoctorExpectation, DoctorFinding, DoctorReport

    finding = DoctorFinding("slow_node", ("b",), (2, 3), ("10.0.0.2",), "ev", 1.5, 3.0, "x", 4, "a")
    hosts = tuple(f"h{i}" for i in range(8))
    matrix = tuple(tuple(None if i == j else float(i + j) for j in range(8)) for i in range(8))
    return DoctorReport(
        "doctor-1",
        False,
        "flagged",
        None,
        ("pair",),
        {"rail": "one rail"},
        3,
        (finding,) * 4,
        hosts,
        matrix,
        (),
        {h: 2.0 for h in hosts},
        {"0": 2.0},
        {h: 1.0 for h in hosts},
        2.5,
        ("n",),
        DoctorExpectation("fleet", {"pair": 3.0}, 10.0, {}, 5.0, "floor.json"),
    )


def converters():
    """name -> (to builtins, from builtins) for DoctorReport."""
    from collbench.store.doctor_report import DoctorReport

    pairs = {}
    import msgspec

    pairs["msgspec"] = (msgspec.to_builtins, lambda d: msgspec.convert(d, DoctorReport))
    import cattrs

    conv = cattrs.Converter()
    pairs["cattrs"] = (conv.unstructure, lambda d: conv.structure(d, DoctorReport))
    import pydantic

    adapter = pydantic.TypeAdapter(DoctorReport)
    pairs["pydantic"] = (
        lambda r: adapter.dump_python(r, mode="json"),
        adapter.validate_python,
    )
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=7)
    parser.add_argument("--conversions", type=int, default=3000)
    args = parser.parse_args()
    print(f"import time, median of {args.imports} fresh interpreters (-X importtime):")
    for module in ("collbench.cli", *LIBRARIES):
        times = [import_ms(module) for _ in range(args.imports)]
        print(
            f"  {module:14s} {statistics.median(times):7.1f} ms  "
            f"(min {min(times):.1f}, max {max(times):.1f})"
        )
    report = sample()
    print(f"DoctorReport to builtins and back, {args.conversions} times (us per round trip):")
    for name, (dump, load) in converters().items():
        data = dump(report)
        assert load(data) == report, name
        start = time.perf_counter()
        for _ in range(args.conversions):
            load(dump(report))
        elapsed = (time.perf_counter() - start) / args.conversions * 1e6
        print(f"  {name:14s} {elapsed:7.1f} us")


if __name__ == "__main__":
    main()
