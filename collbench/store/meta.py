"""meta.json: a run's provenance, typed. A sweep's rank 0 and an import write one each.

The method, in full: docs/run-directory.md#collbench-store-meta-py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from collbench.store.row_values import type_check
from collbench.store.rows import SCHEMA_VERSION

# meta.json key order as rank 0 writes it when a sweep starts; the end of the run appends
# rows, n_wrong_total and error (store.rundir.update_meta).
SWEEP_LAYOUT = (
    "schema_version",
    "run_id",
    "state",
    "started_utc",
    "finished_utc",
    "command_line",
    "launcher",
    "backend",
    "torch_backend",
    "world_size",
    "nodes",
    "ranks_per_node",
    "hosts",
    "ranks",
    "timing_method",
    "versions",
    "git_sha",
    "knobs",
    "spec",
    "topology",
    "cwd",
    "rank_env",
    "rendezvous",
)
# meta.json key order of an import (analysis.nccl_import_rows).
IMPORT_LAYOUT = (
    "schema_version",
    "run_id",
    "state",
    "source",
    "imported_from",
    "imported_utc",
    "timing_method",
    "backend",
    "world_size",
    "nodes",
    "ranks_per_node",
    "hosts",
    "ranks",
    "command_line",
    "comment",
    "versions",
    "version_lines",
    "header",
    "footer",
    "footer_missing",
    "collectives",
    "knobs",
    "topology",
    "logs",
    "legacy_errors",
    "warnings",
)


@dataclass(frozen=True)
class RunMeta:
    """A run's meta.json. Every field may be unknown (None, empty) in an older run's file."""

    schema_version: int | None = SCHEMA_VERSION
    run_id: str | None = None
    state: str | None = None  # running | completed | failed | interrupted | orphaned | cancelled
    # The tool whose logs were imported ("nccl-tests", "rccl-tests"); None: collbench.
    source: str | None = None
    command_line: list[str] | str | None = None  # argv of a sweep; the logged line of an import
    launcher: str | None = None
    backend: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    hosts: list[str] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # one identity per rank
    timing_method: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)
    topology: str | None = None
    spec: dict[str, Any] | None = None  # the sweep's SweepSpec.to_dict()
    started_utc: str | None = None
    finished_utc: str | None = None
    git_sha: str | None = None
    imported_from: list[str] = field(default_factory=list)  # resolved log paths
    imported_utc: str | None = None
    comment: str | None = None  # the log's own comment lines
    warnings: list[str] = field(default_factory=list)
    # NCCL/RCCL config files that existed, path -> contents (bench.provenance.nccl_conf_files):
    # they set variables silently. Written only when there is one.
    nccl_conf_files: dict[str, str] = field(default_factory=dict)
    # Keys only one source writes, e.g. a sweep's "cwd", "n_wrong_total", "error" or an
    # import's "logs", "header", "footer"; in the file's order.
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunMeta:
        """A meta.json's content: known keys typed, every other key kept in `extra`, and so is
        a known key of the wrong type (a damaged file's `"ranks": [1, 2]`): it reads unknown."""
        kinds = {item.name: item.type for item in fields(cls) if item.name != "extra"}
        typed = {key: val for key, val in data.items() if key in kinds and _fits(val, kinds[key])}
        extra = {name: value for name, value in data.items() if name not in typed}
        return cls(**typed, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """meta.json's content, keys in the order its source has always written them."""
        layout = IMPORT_LAYOUT if self.source else SWEEP_LAYOUT
        typed = {item.name: item for item in fields(self) if item.name != "extra"}
        data: dict[str, Any] = {}
        for name in layout:
            if name in typed:
                data[name] = getattr(self, name)
            elif name in self.extra:
                data[name] = self.extra[name]
        # A field the layout does not place is written only when set (not its default).
        for name, item in typed.items():
            value = getattr(self, name)
            default = item.default_factory() if callable(item.default_factory) else item.default
            if name not in data and value != default:
                data[name] = value
        data.update({name: value for name, value in self.extra.items() if name not in data})
        return data


def _fits(value: Any, annotation: str) -> bool:
    """Whether a JSON value fits a field's `annotation`: the rows' own type checks
    (row_values.type_check; a bool is no int), and None only where the field allows it."""
    if value is None:
        return annotation.endswith("None")
    check = type_check(annotation)
    return check is None or check(value) is None
