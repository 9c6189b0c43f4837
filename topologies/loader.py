"""Find and read topology files: catalog names (package data) or a path to YAML/TOML."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10 reads YAML only
    tomllib = None  # type: ignore[assignment]

from collbench.topologies.schema import Topology, TopologyError, topology_from_dict

SUFFIXES = (".yaml", ".yml", ".toml")


def catalog_names() -> list[str]:
    """Names of the shipped topologies, sorted."""
    root = resources.files("collbench.topologies")
    return sorted(
        entry.name.rsplit(".", 1)[0] for entry in root.iterdir() if entry.name.endswith(SUFFIXES)
    )


def load_topology(name_or_path: str | Path, option: str = "--topology") -> Topology:
    """A catalog topology by name, or a file by path; TopologyError if missing or bad.

    `option` is what an error about the name itself calls it (the CLI option or argument).
    """
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in SUFFIXES or path.exists():
        if not path.is_file():
            raise TopologyError(option, text, "is not a file")
        return topology_from_dict(_parse(_read(path, text), path.suffix, text), str(path))
    root = resources.files("collbench.topologies")
    for suffix in SUFFIXES:
        entry = root / f"{text}{suffix}"
        if entry.is_file():
            return topology_from_dict(_parse(entry.read_text(encoding="utf-8"), suffix, text), text)
    known = ", ".join(catalog_names()) or "none shipped"
    raise TopologyError(option, text, f"is neither a file nor a catalog name ({known})")


def _read(path: Path, origin: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TopologyError(
            "topology file", origin, f"is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except OSError as error:
        raise TopologyError("topology file", origin, f"cannot be read: {error.strerror}") from None


def _parse(text: str, suffix: str, origin: str) -> Any:
    if suffix == ".toml" and tomllib is None:
        raise TopologyError("topology file", origin, "is TOML, which needs Python 3.11+; use YAML")
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader without aliases
    except _AliasRefused as refused:
        raise TopologyError(
            "topology file",
            origin,
            f"uses a YAML alias (*{refused.anchor}{refused.where}); topology files may not "
            "(nested aliases can expand without bound): write the values out",
        ) from None
    except (yaml.YAMLError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        detail = " ".join(str(error).split())
        raise TopologyError(
            "topology file",
            origin,
            f"is not valid {suffix.lstrip('.').upper() or 'YAML'}: {detail}",
        ) from None


class _AliasRefused(Exception):
    def __init__(self, anchor: str, where: str) -> None:
        super().__init__(anchor)
        self.anchor, self.where = anchor, where


class _NoAliasLoader(yaml.SafeLoader):
    """yaml.safe_load without aliases: a few hundred bytes of nested aliases ("billion
    laughs") expand to gigabytes and hang whatever reads or prints the document."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            mark = event.start_mark
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise _AliasRefused(str(event.anchor), where)
        return super().compose_node(parent, index)
