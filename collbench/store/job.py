"""A Job: one sweep to run, as the launcher hands it to every rank (job.json)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.store.reading import load_json_object
from collbench.store.rundir import write_json_atomic

JOB_FILE = "job.json"


@dataclass(frozen=True)
class Job:
    """What every rank needs: the spec (backend resolved), where results go, and why."""

    spec: SweepSpec
    run_dir: Path
    run_id: str
    launcher: str
    nproc: int
    command_line: list[str] = field(default_factory=list)
    # Which rank environment the ranks read (collbench.bench.rank_env.RANK_ENVS); None: detect.
    rank_env: str | None = None
    # False: rank 0 creates the run directory (a job launched without collbench's help).
    dir_prepared: bool = True
    # The launcher's own settings (torchrun nodes, Slurm partition, ...), as plain values.
    settings: dict = field(default_factory=dict)

    def save(self) -> Path:
        path = Path(self.run_dir) / JOB_FILE
        data = {column.name: getattr(self, column.name) for column in fields(self)}
        write_json_atomic(path, {**data, "spec": self.spec.to_dict(), "run_dir": str(self.run_dir)})
        return path

    @classmethod
    def load(cls, run_dir: Path) -> Job:
        """The job of a run directory; a job.json that is not one is a SpecError naming it."""
        path = Path(run_dir) / JOB_FILE
        # Within core.limits, and an object: a list, a FIFO or deep nesting is refused here.
        try:
            data = load_json_object(path, JOB_FILE)
        except SpecError as error:
            raise SpecError(
                JOB_FILE, str(path), f"is corrupt or unreadable: it {error.hint}"
            ) from None
        _check_shape(data, path)
        try:
            return cls(
                spec=SweepSpec.from_dict(data["spec"]),
                run_dir=Path(data["run_dir"]),
                run_id=str(data["run_id"]),
                launcher=str(data["launcher"]),
                nproc=int(data["nproc"]),
                command_line=list(data["command_line"]),
                rank_env=data.get("rank_env"),
                dir_prepared=bool(data.get("dir_prepared", True)),
                settings=dict(data.get("settings") or {}),
            )
        except SpecError as error:
            raise SpecError(JOB_FILE, str(path), f"is corrupt: {error}") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            first = str(error).strip().splitlines()[:1] or [type(error).__name__]
            why = f"lacks {error}" if isinstance(error, KeyError) else first[0]
            raise SpecError(JOB_FILE, str(path), f"is corrupt or unreadable ({why})") from None


# job.json's keys and the JSON types each must have (None: the key may be null or absent).
_SHAPE = {
    "spec": (dict,),
    "run_dir": (str,),
    "run_id": (str,),
    "launcher": (str,),
    "nproc": (int,),
    "command_line": (list,),
    "rank_env": (str, None),
    "dir_prepared": (bool, None),
    "settings": (dict, None),
}

_JSON_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    bool: "a boolean",
}


def _check_shape(data: dict, path: Path) -> None:
    """SpecError naming job.json and the first key whose value has the wrong JSON type."""
    for key, kinds in _SHAPE.items():
        value = data.get(key)
        if value is None and None in kinds:
            continue
        typed = tuple(kind for kind in kinds if kind is not None)
        if (
            value is None
            or isinstance(value, bool) != (bool in typed)
            or not isinstance(value, typed)
        ):
            wanted = " or ".join(_JSON_NAMES[kind] for kind in typed)
            raise SpecError(
                JOB_FILE, str(path), f"is corrupt: {key} is {value!r:.40}, not {wanted}"
            )
    if not all(isinstance(word, str) for word in data["command_line"]):
        raise SpecError(JOB_FILE, str(path), "is corrupt: command_line holds a non-string")
