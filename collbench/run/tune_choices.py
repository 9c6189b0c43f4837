"""What NCCL chose during a tune: the debug environment for the choices pass, and its log
files read back into one choices.jsonl line per (setting, collective, size) NCCL decided.

The parsing is analysis/imports/nccl_choice.py's; this module only names files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from collbench.analysis.imports.nccl_choice import debug_env, parse_choices, summarize

DEBUG_FILE = "nccl-%h-%p.log"  # NCCL expands %h (host) and %p (pid): one file per process


def choices_env(folder: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """NCCL_DEBUG, NCCL_DEBUG_SUBSYS (widened, never narrowed) and NCCL_DEBUG_FILE into
    `folder` (which must exist: NCCL falls back to stdout otherwise)."""
    return debug_env(None, str(Path(folder).absolute() / DEBUG_FILE), environ)


def collect_choices(folder: Path, setting_id: str, out_file: Path) -> int:
    """Append what the debug files in `folder` say NCCL used, one JSON line per collective
    and size, to `out_file`; returns the lines written."""
    lines: list[str] = []
    for path in sorted(Path(folder).glob("nccl-*.log")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    written = 0
    with open(out_file, "a", encoding="utf-8") as handle:
        for summary in summarize(parse_choices(lines)):
            for used in summary.used:
                entry = {
                    "setting": setting_id,
                    "collective": summary.collective,
                    "size_bytes": summary.size_bytes,
                    "size_is_logged": summary.size_is_logged,
                    "algorithm": used.algorithm,
                    "protocol": used.protocol,
                    "channels": used.channels,
                    "count": used.count,
                }
                handle.write(json.dumps(entry) + "\n")
                written += 1
    return written


def conf_files() -> dict[str, str]:
    """The NCCL/RCCL config files this host has (they set variables silently)."""
    from collbench.bench.provenance import nccl_conf_files

    return nccl_conf_files(os.environ, os.environ.get("HOME"))
