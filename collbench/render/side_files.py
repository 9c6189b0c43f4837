"""Complete a run's `--csv` / `-J` files from rows.jsonl when the collbench writing them died.

The launching process writes the side files as rows arrive (export.ExportSink) and records
them in the run (store/side_files.py). Killed (SIGKILL, a lost node), it leaves them short of
rows.jsonl, where the ranks went on. `collbench finalize RUN` calls `complete_side_files`:
each file is rewritten whole, atomically, in the layout the sink writes (the CSV's columns,
one nccl-tests JSON file per collective measured, named as -J names them), so both hold
every finished row, as docs/errors.md promises. A file that is no longer the one collbench
began (another header, not nccl-tests JSON) is left alone and named.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from collbench.render.export import (
    csv_columns,
    csv_record,
    group_sizes,
    json_paths,
    nccl_entry,
    nccl_footer,
    nccl_head,
)
from collbench.store.load import Run, load_run
from collbench.store.rows import SWEEP, row_is
from collbench.store.rundir import write_atomically
from collbench.store.side_files import SideFiles, read_side_files

_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # nccl-tests' TIME_STRING_FORMAT, as export.py writes it


@dataclass
class Completed:
    """What `complete_side_files` did: the files rewritten, and those it left alone (why)."""

    written: list[Path] = field(default_factory=list)
    left: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.written or self.left)

    def describe(self) -> str:
        """One clause for finalize's line ("" when nothing was to be done)."""
        parts = []
        if self.written:
            names = ", ".join(str(path) for path in self.written)
            parts.append(f"side file(s) completed from rows.jsonl: {names}")
        parts += [f"not rewritten: {line}" for line in self.left]
        return "; ".join(parts)


def complete_side_files(run_dir: Path) -> Completed:
    """Rewrite the side files of a run whose launcher did not finish them (its record says
    not complete and the launcher is gone); nothing for a run without such a record."""
    record = read_side_files(run_dir)
    done = Completed()
    if record is None or record.complete or record.writer_alive():
        return done
    run = load_run(run_dir)
    if record.csv is not None:
        _complete(Path(record.csv), _csv_text(run), _is_our_csv(run), done)
    if record.nccl_json is not None:
        for path, text in _json_texts(run, record).items():
            _complete(path, text, _is_our_json, done)
    if not done.left:
        record.completed().save(run_dir)
    return done


def _complete(path: Path, text: str, ours: object, done: Completed) -> None:
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not (target.is_file() and ours(target)):  # type: ignore[operator]
        done.left.append(f"{path} is no longer the file collbench began (changed or replaced)")
        return
    if not target.parent.is_dir():
        done.left.append(f"{path}: its folder is gone")
        return
    write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    done.written.append(path)


def _csv_text(run: Run) -> str:
    columns = _columns(run)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(columns)
    for row in run.rows:
        writer.writerow(csv_record(row, columns))
    return text.getvalue()


def _columns(run: Run) -> tuple[str, ...]:
    return csv_columns((run.meta.spec or {}).get("overlap") is not None)


def _is_our_csv(run: Run):  # noqa: ANN202 - a predicate for _complete
    header = ",".join(_columns(run))

    def check(path: Path) -> bool:
        with open(path, encoding="utf-8", errors="replace") as stream:
            return stream.readline().rstrip("\r\n") == header

    return check


def _is_our_json(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as stream:
        return stream.read(64).startswith('{"version": ')


def _json_texts(run: Run, record: SideFiles) -> dict[Path, str]:
    """Each collective's nccl-tests JSON file, named as the sink names it, with its
    end_time and the run's error (none for a run its ranks completed)."""
    sweep = [row for row in run.rows if row_is(row, SWEEP)]
    spec = run.meta.spec or {}
    collectives = list(record.collectives) or list(dict.fromkeys(r.collective for r in sweep))
    per_iter = spec.get("rank_stat") == "max"
    head = nccl_head(run.meta, per_iter)
    end = datetime.now(timezone.utc).strftime(_TIME_FORMAT)
    error = run.meta.extra.get("error")
    errors = [str(error)] if error else []
    texts = {}
    for collective in dict.fromkeys(row.collective for row in sweep):
        names = collectives if collective in collectives else [*collectives, collective]
        path = json_paths(Path(str(record.nccl_json)), names)[collective]
        rows = [row for row in sweep if row.collective == collective]
        entries = [nccl_entry(group) for group in group_sizes(rows)]
        document = {**head, "results": entries, **nccl_footer(entries, errors, end)}
        texts[path] = json.dumps(document)
    return texts
