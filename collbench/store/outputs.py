"""Where a command may write, and how: one check of every output path before anything runs,
and one writer that leaves a whole file or none.

The method, in full: docs/run-directory.md#collbench-store-outputs-py.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from collbench.core.errors import CollbenchError, SpecError

# Limits every Linux file system collbench writes to has (a NAME_MAX the folder reports
# lower wins): longer names fail with ENAMETOOLONG, refused here first.
NAME_MAX = 255
PATH_MAX = 4096
FORCE_HELP = (
    "Write over output files that exist (never over a run's own files, nor into a run directory)."
)
# What makes a folder a run directory (rundir.py, job.py, tune, gemm): an output path inside
# one is refused. META_FILE counts only beside one of RUN_DATA (a project's own meta.json
# does not make its folder a run).
CLAIM_MARKER = ".claimed"
TUNE_MARKER = "tune.json"
META_MARKER = "meta.json"
RUN_DATA = ("rows.jsonl", "gemm.jsonl", "job.json", "rows.parquet")
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class OutputError(CollbenchError):
    """An output could not be written (a full disk, an I/O error): one line naming the
    option and the path; what was being written has been removed."""

    def __init__(self, flag: str, path: Path | str, error: OSError, kept: str = "") -> None:
        what = "nothing was left half-written" if not kept else kept
        super().__init__(f"{flag}: {str(path)!r} could not be written ({reason(error)}); {what}")


def reason(error: OSError) -> str:
    """An OSError as a few words: "the disk is full", "Read-only file system" ..."""
    if is_disk_full(error):
        return "the disk is full"
    return (error.strerror or str(error)).rstrip(".") or type(error).__name__


def is_disk_full(error: BaseException) -> bool:
    """Did this error come from a full disk (or quota)?"""
    if not isinstance(error, OSError):
        return False
    # pyarrow's write errors carry the errno only in their text
    return error.errno in _DISK_FULL or "No space left on device" in str(error)


def path_error(flag: str, path: Path | str, error: OSError, folder: bool = False) -> CollbenchError:
    """The one-line error for an OSError met while checking or creating `path` (a run
    directory's `folder`): exit 1 for a full disk, else exit 2 (the path cannot be used)."""
    if is_disk_full(error):
        return OutputError(flag, path, error)
    verb = "created or written" if folder else "written"
    return SpecError(flag, str(path), f"cannot be {verb}: {reason(error)}")


def check_output_files(
    outputs: Sequence[tuple[str, Path | str]],
    inputs: Iterable[Path | str] = (),
    force: bool = False,
) -> None:
    """Check each (flag, path) with check_output_file, and that no two name one file."""
    seen: dict[Path, str] = {}
    for flag, path in outputs:
        target = check_output_file(flag, path, inputs, force)
        if target in seen:
            raise SpecError(
                flag, str(path), f"is also {seen[target]}'s file: give each output its own path"
            )
        seen[target] = flag


def check_output_file(
    flag: str, path: Path | str, inputs: Iterable[Path | str] = (), force: bool = False
) -> Path:
    """Check that a file can be written at `path` (SpecError naming `flag` if not; see the
    module's docstring); the file it will be (a live symbolic link's target)."""
    path = Path(path)
    target = _target(flag, path)
    _refuse_inside_runs(flag, path, target, inputs)
    if target.exists():
        if target.is_dir():
            raise SpecError(flag, str(path), "is a directory; give a file name")
        if not target.is_file():
            raise SpecError(flag, str(path), "is not a regular file; give a file name")
        if not force:
            raise SpecError(
                flag, str(path), "exists: remove it or name another file (or give --force)"
            )
    _check_folder(flag, path, target.parent)
    return target


def check_output_dir(
    flag: str, path: Path | str, inputs: Iterable[Path | str] = (), allowed: Iterable[str] = ()
) -> Path:
    """Check that `path` can be a new run directory: new or empty (but for `allowed`
    entries), not inside an input, and its nearest existing folder writable (SpecError,
    or OutputError for a full disk). The directory it will be."""
    path = Path(path)
    target = _target(flag, path)
    for given in inputs:
        owner = Path(given).resolve()
        if target == owner or owner in target.parents:
            raise SpecError(flag, str(path), f"is inside {given}, an input: write elsewhere")
    if target.exists():
        allowed = set(allowed)
        if not target.is_dir() or any(entry.name not in allowed for entry in target.iterdir()):
            raise SpecError(
                flag,
                str(path),
                "is not an empty directory; choose a new one (collbench never mixes two runs)",
            )
        _probe(flag, path, target, run_dir=True)
        return target
    folder = next(folder for folder in target.parents if folder.exists())  # "/" exists
    if not folder.is_dir():
        raise SpecError(flag, str(path), f"is under {folder}, which is not a folder")
    _probe(flag, path, folder, run_dir=True)
    return target


def write_output(flag: str, path: Path | str, data: bytes | str) -> Path:
    """Write `data` to `path` (a file checked by check_output_file): a temporary file beside
    it, flushed, then renamed into place, so a reader or a kill never meets half a file. A
    failure removes the temporary file and raises OutputError (a full disk) or SpecError."""
    target = Path(path).resolve()
    tmp = target.parent / f".collbench-{secrets.token_hex(4)}.tmp"
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        fsync_path(tmp, os.O_RDONLY)
        os.replace(tmp, target)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise path_error(flag, path, error) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the file is whole; its folder's entry is the system's
        fsync_path(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    return Path(path)


def write_outputs(
    flag: str, files: dict[Path, bytes], flags: dict[Path, str] | None = None
) -> None:
    """Write several files that make one output (a report and its images, an export's CSV
    and JSON files), in order; on a failure remove those written here and any folder made
    for them, then raise. `flags` names the option of a file whose is not `flag`."""
    written: list[Path] = []
    made: list[Path] = []
    try:
        for path, data in files.items():
            option = (flags or {}).get(path, flag)
            if not path.parent.is_dir():
                try:
                    path.parent.mkdir()
                except OSError as error:
                    raise path_error(option, path.parent, error) from None
                made.append(path.parent)
            write_output(option, path, data)
            written.append(path)
    except BaseException:
        for path in written:
            Path(path).unlink(missing_ok=True)
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def is_run_dir(folder: Path) -> bool:
    """Whether `folder` holds a run (or a tune result): see CLAIM_MARKER and RUN_DATA."""
    try:
        if (folder / CLAIM_MARKER).exists() or (folder / TUNE_MARKER).exists():
            return True
        return (folder / META_MARKER).exists() and any(
            (folder / name).exists() for name in RUN_DATA
        )
    except OSError:
        return False


def _target(flag: str, path: Path) -> Path:
    """The absolute path written to (through a live symbolic link), after the name checks."""
    text = str(path)
    if not text.strip() or text == ".":
        raise SpecError(flag, text, "names no file")
    if "\x00" in text:
        raise SpecError(flag, text, "holds a NUL character")
    if len(os.fsencode(os.path.abspath(text))) >= PATH_MAX:
        raise SpecError(flag, _cut(text), f"is too long (a path has at most {PATH_MAX - 1} bytes)")
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise SpecError(
                flag,
                _cut(text),
                f"has a name of {len(os.fsencode(part))} bytes; at most {NAME_MAX} are allowed",
            )
    if path.is_symlink() and not path.exists():
        raise SpecError(
            flag, text, f"is a symbolic link to {os.readlink(path)}, which does not exist"
        )
    try:
        return path.resolve()
    except (OSError, RuntimeError) as error:  # a loop of links
        raise SpecError(flag, text, f"cannot be followed: {error}") from None


def _refuse_inside_runs(flag: str, path: Path, target: Path, inputs: Iterable[Path | str]) -> None:
    for given in inputs:
        owner = Path(given).resolve()
        if target == owner:
            raise SpecError(
                flag,
                str(path),
                "is a run directory or file this command reads or writes: write elsewhere",
            )
        if owner in target.parents:
            raise SpecError(
                flag,
                str(path),
                f"is inside {given}, a run directory this command reads or writes: write elsewhere",
            )
    run_dir = next((folder for folder in target.parents if is_run_dir(folder)), None)
    if run_dir is not None:
        raise SpecError(
            flag,
            str(path),
            f"is inside the run directory {run_dir}: collbench never writes into a run's files",
        )


def _check_folder(flag: str, path: Path, folder: Path) -> None:
    if not folder.is_dir():
        above = next((part for part in (folder, *folder.parents) if part.exists()), folder)
        if not above.is_dir():
            raise SpecError(flag, str(path), f"is under {above}, which is not a folder")
        raise SpecError(
            flag, str(path), f"cannot be written: it is in a folder that does not exist ({folder})"
        )
    _probe(flag, path, folder)


def _probe(flag: str, path: Path, folder: Path, run_dir: bool = False) -> None:
    """Create, write a byte to and remove a file in `folder`: a read-only or unwritable
    folder, and a disk already full, are refused before anything runs."""
    probe = folder / f".collbench-{secrets.token_hex(4)}.probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise path_error(flag, path, error, run_dir) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def fsync_path(path: Path, flags: int) -> None:
    """fsync a file (O_RDONLY) or a directory (O_DIRECTORY): data, then the name, on disk."""
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EBADF):  # a file system without fsync
            raise
    finally:
        os.close(fd)


def _cut(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."
