"""`--csv FILE` and `-J FILE` (nccl-tests' JSON layout) on `sweep` and `wait`, and
`collbench export RUN` for a run that already exists (imported, Slurm, or run without them).

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.cli.options import Argument, Option, command, force_option, given_fields, warn
from collbench.core.errors import EXIT_OK, EXIT_RUN_FAILED, SpecError

OUTPUT_PANEL = "Output"


@dataclass(frozen=True)
class Exports:
    """The files a run's rows go to besides the run directory (None: not asked for)."""

    csv: Path | None = None
    nccl_json: Path | None = None
    force: bool = False  # write over existing files (never into a run directory)

    @classmethod
    def given(cls, values: dict[str, Any], collectives: Iterable[str] = ()) -> Exports:
        """The --csv / -J files given, checked before anything runs (store/outputs.py): an
        existing file is refused (unless --force), and so is one inside the run directory
        read or written (RUN, --out), one path given twice, and one that cannot be
        written; `collectives` name the -J files to check."""
        from collbench.render.export import json_paths
        from collbench.store.outputs import check_output_files

        exports = cls(**given_fields(cls, EXPORT_OPTIONS, values))
        checks = [(CSV_FILE.flag, exports.csv)] if exports.csv else []
        if exports.nccl_json:
            names = list(collectives) or ["all"]
            checks += [("-J", path) for path in json_paths(exports.nccl_json, names).values()]
        runs = [values[name] for name in ("run", "out") if values.get(name) is not None]
        check_output_files(checks, runs, exports.force)
        return exports

    def __bool__(self) -> bool:
        return self.csv is not None or self.nccl_json is not None


CSV_FILE = Option(
    ("--csv",),
    "Also write the rows to FILE as CSV, each as it finishes.",
    Exports,
    panel=OUTPUT_PANEL,
    name="csv_file",
    metavar="FILE",
)
NCCL_JSON_FILE = Option(
    ("--nccl-json", "-J"),
    "Also write FILE in nccl-tests' -J JSON layout (one file per collective: "
    "FILE's stem.NAME.json when there are several).",
    Exports,
    panel=OUTPUT_PANEL,
    name="nccl_json_file",
    metavar="FILE",
)
EXPORT_OPTIONS = (CSV_FILE, NCCL_JSON_FILE, force_option(Exports, panel=OUTPUT_PANEL))


class SinkMaker:
    """Makes the sink a run's rows reach (SinkFactory): the console's, wrapped so the rows
    also go to the export files. `on_backend` hears the run's backend once it is known:
    at once when the job's spec has it, else when the ranks' meta.json says it."""

    def __init__(
        self,
        console: Callable[[Any], Any],
        exports: Exports = Exports(),
        on_backend: Callable[[str | None], None] | None = None,
    ) -> None:
        self.console, self.exports, self.on_backend = console, exports, on_backend
        self.made: list[Any] = []

    def __call__(self, spec: Any) -> Any:
        sink = self.console(spec)
        on_start = None
        if self.on_backend is not None:
            if getattr(spec, "backend", "auto") != "auto":
                self.on_backend(spec.backend)
            else:
                on_backend = self.on_backend
                on_start = lambda meta: on_backend(meta.backend)  # noqa: E731
        if not self.exports and on_start is None:
            return sink
        from collbench.render.export import ExportSink

        sink = ExportSink(sink, self.exports.csv, self.exports.nccl_json, on_start)
        self.made.append(sink)
        return sink

    def done(self, error: str | None, say: bool) -> int:
        """The run is over: record its error in the JSON files; with `say`, name the files.
        A file that could not be written (a full disk) is said on stderr: the exit code
        then (1, EXIT_RUN_FAILED), else 0."""
        failures = []
        for sink in self.made:
            if error:
                sink.fail(error)
            if say:
                for path in sink.written:
                    print(f"# Exported: {path}", flush=True)
            failures += sink.failures
        warn(failures, "error")
        return EXIT_RUN_FAILED if failures else EXIT_OK


EXPORT_COMMAND_OPTIONS = (
    Argument("run", "A run directory (a sweep, import or Slurm run).", kind=Path),
    *EXPORT_OPTIONS,
)


def run_export(values: dict[str, Any]) -> None:
    from collbench.render.export import export_run, write_export
    from collbench.store.load import load_run
    from collbench.store.meta import RunMeta
    from collbench.store.rundir import iter_rows, read_meta

    run = values["run"]
    exports = Exports(**given_fields(Exports, EXPORT_OPTIONS, values))
    if not exports:
        raise SpecError.from_message("export: give --csv FILE, -J FILE or both")
    # A row at a time (render/export.py: export_run): memory follows the files, not the samples.
    rows = iter_rows(Path(run)) if Path(run).is_dir() else iter(())
    built = export_run(rows, exports.csv, exports.nccl_json)
    if not built.rows:
        load_run(run, "RUN")  # says why there are none (no rows.jsonl, gemm rows)
    exports = Exports.given(values, built.collectives)
    if exports.nccl_json is not None and not built.collectives:
        raise SpecError("-J", str(exports.nccl_json), f"{run} holds no sweep rows to write")
    meta = read_meta(Path(run), "RUN") or RunMeta()
    for path in write_export(built, meta, exports.csv, exports.nccl_json):
        print(f"# Exported: {path}", file=sys.stdout, flush=True)


export = command(
    "export",
    "Write a run's rows as CSV and/or in nccl-tests' -J JSON layout.",
    EXPORT_COMMAND_OPTIONS,
    run_export,
)
