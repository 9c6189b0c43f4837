"""Find and read topology files: catalog names (package data) or a path to YAML/TOML."""

from __future__ import annotations

import os
import stat
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10 reads YAML only
    tomllib = None  # type: ignore[assignment]

from collbench.core.limits import MAX_NESTING_DEPTH, TOPOLOGY_MAX_BYTES, size_text, too_deep
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
    """A topology file's text: a regular file of at most TOPOLOGY_MAX_BYTES, checked before
    it is read (a 12 MB file of unknown keys is refused at once, a FIFO never opened for
    reading)."""
    try:
        _check_file(os.stat(path), origin)
        # O_NONBLOCK: a FIFO put in the file's place after the stat does not block the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as file:
            _check_file(os.fstat(fd), origin)
            os.set_blocking(fd, True)
            data = file.read(TOPOLOGY_MAX_BYTES + 1)
    except OSError as error:
        raise TopologyError("topology file", origin, f"cannot be read: {error.strerror}") from None
    _check_size(len(data), origin)  # it may have grown after the stat
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TopologyError(
            "topology file", origin, f"is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def _check_file(info: os.stat_result, origin: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TopologyError("topology file", origin, "cannot be read: it is not a regular file")
    _check_size(info.st_size, origin)


def _check_size(n_bytes: int, origin: str) -> None:
    if n_bytes > TOPOLOGY_MAX_BYTES:
        raise TopologyError(
            "topology file",
            origin,
            f"is {n_bytes} bytes, over the {size_text(TOPOLOGY_MAX_BYTES)} limit for a "
            "topology file (the catalog's are a few KiB)",
        )


def _parse(text: str, suffix: str, origin: str) -> Any:
    if suffix == ".toml" and tomllib is None:
        raise TopologyError("topology file", origin, "is TOML, which needs Python 3.11+; use YAML")
    try:
        if suffix == ".toml":
            if too_deep(text, toml=True):  # tomllib recurses once per level
                raise _too_deep("")
            return tomllib.loads(text)
        return yaml.load(text, Loader=_StrictLoader)
    except _Refused as refused:
        raise TopologyError("topology file", origin, str(refused)) from None
    except (yaml.YAMLError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
        detail = " ".join(str(error).split())
        raise TopologyError(
            "topology file",
            origin,
            f"is not valid {suffix.lstrip('.').upper() or 'YAML'}: {detail}",
        ) from None


def _where(mark: Any, earlier: Any = None) -> str:
    """ " at line N" for a YAML mark; " (lines M and N)" with the mark of an earlier one."""
    if earlier is None:
        return f" at line {mark.line + 1}"
    return f" (lines {earlier.line + 1} and {mark.line + 1})"


class _Refused(Exception):
    """What the file holds that a topology file may not (the TopologyError's hint)."""


def _too_deep(where: str) -> _Refused:
    return _Refused(
        f"nests deeper than {MAX_NESTING_DEPTH} levels{where}, collbench's limit "
        "(a topology nests fewer than 5)"
    )


class _StrictLoader(yaml.SafeLoader):
    """yaml.safe_load without aliases, deep nesting or duplicated keys.

    Aliases: a few hundred bytes of nested aliases ("billion laughs") expand to gigabytes
    and hang whatever reads or prints the document. Nesting: the composer recurses once per
    level, so thousands of levels are a RecursionError; MAX_NESTING_DEPTH is refused first.
    Duplicated keys: YAML keeps the last silently (`nodes` given twice), a typo's cousin.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(
                f"uses a YAML alias (*{event.anchor}{_where(event.start_mark)}); topology files "
                "may not (nested aliases can expand without bound): write the values out"
            )
        self._depth += 1
        try:
            if self._depth > MAX_NESTING_DEPTH:
                raise _too_deep(_where(self.peek_event().start_mark))
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_object(key_node)
                if key in seen:
                    raise _Refused(
                        f"gives the key {key!r} twice{_where(key_node.start_mark, seen[key])}: "
                        "remove one (YAML would silently keep the last)"
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)
