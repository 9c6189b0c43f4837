"""nccl-tests' `blocking_collectives` (-J's config) for a collbench run: whether the host
waited for each collective to finish before it started the next (nccl-tests' -z).

Pure: a run's meta.json in, a bool out.
"""

from __future__ import annotations

from collections.abc import Sequence

from collbench.store.meta import RunMeta


def blocking_collectives(meta: RunMeta, args: Sequence[str]) -> bool:
    """nccl-tests' `blocking_collectives` (its -z: the host waits for each collective to
    finish before it starts the next) for the run that `meta` describes.

    An import: what the log says (the `# Blocking Enabled` line or the JSON's config, as the
    import recorded them, else -z/--blocking in `args`, its recorded command line;
    nccl-tests' default is 0). A sweep: a CPU rank (gloo, timed by perf_counter) blocks
    after every operation, since a gloo call returns when the operation is done; a GPU rank
    (nccl, rccl) queues its collectives, unless its recorded environment holds a variable
    that makes the host wait for each (core.overlap.BLOCKING_ENV, e.g.
    TORCH_NCCL_BLOCKING_WAIT=1).
    """
    from collbench.bench.timing import CpuTimer
    from collbench.core.overlap import blocking_env

    if meta.source:
        if (meta.extra.get("header") or {}).get("blocking"):
            return True
        return _blocking_arg(args)
    if meta.timing_method == CpuTimer.method or (
        meta.timing_method is None and meta.backend == "gloo"
    ):
        return True
    env = meta.knobs.get("env") if isinstance(meta.knobs.get("env"), dict) else meta.knobs
    return bool(blocking_env({str(name): str(value) for name, value in env.items()}))


def _blocking_arg(args: Sequence[str]) -> bool:
    """Whether nccl-tests' arguments hold -z N or --blocking N (also -zN, --blocking=N)
    with N other than 0."""
    for index, arg in enumerate(args):
        for flag in ("-z", "--blocking"):
            if arg == flag and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(flag + "=") or (flag == "-z" and arg.startswith("-z")):
                value = arg.removeprefix(flag).removeprefix("=")
            else:
                continue
            return value.strip() not in ("", "0")
    return False
