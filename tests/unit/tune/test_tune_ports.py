"""Multi-node torchrun tune: every node runs its own `collbench tune`, walks the same
settings, and must rendezvous at the same port for each sweep. Only node 0 sees the rows (the
run directories are written there), so nothing a node derives a port from may depend on
rows: the port comes from the setting's index, the repeat and the kind of sweep alone.

The launch itself is the subprocess boundary (two nodes cannot run here): run_sweep is
replaced by a recorder of the options each sweep would be launched with; node 0's sweeps
leave a run directory whose rows say nccl (what its ranks would have said on GPUs)."""

from pathlib import Path

import pytest

import collbench.run.tune.launch as tune_module
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import KnobAxis
from collbench.launchers.base import LaunchResult
from collbench.run.sweep import RunOptions
from collbench.run.tune.launch import TunePlan, Tuner
from collbench.run.tune.plan import round_port
from collbench.store.rundir import META_FILE
from tests.rows import make_row

AXES = (KnobAxis("NCCL_ALGO", ("Ring", "Tree")), KnobAxis("NCCL_PROTO", ("LL", "Simple")))


class _Loaded:
    def rows_of(self, kind):
        return [make_row(backend="nccl", collective="all_reduce")]


def _walk(
    tmp_path: Path, node_rank: int, monkeypatch, repeats: int = 2, backend: str = "auto"
) -> tuple[Tuner, list]:
    """One node's tune (grid, --repeats `repeats`): the rendezvous port of every sweep, in
    order, with the name of the folder it was for."""
    launched = []

    def run_sweep(spec, options, command_line, make_sink):
        launched.append((options.extra["master_port"], Path(options.out).name))
        if node_rank == 0 and Path(options.out).parent.name == "settings":
            Path(options.out).mkdir(parents=True)
            (Path(options.out) / META_FILE).write_text("{}")
        return LaunchResult(0), Path(options.out)

    monkeypatch.setattr(tune_module, "run_sweep", run_sweep)
    monkeypatch.setattr(tune_module, "load_run", lambda path: _Loaded())
    extra = {"nnodes": 2, "node_rank": node_rank, "master_addr": "10.0.0.1", "master_port": 29500}
    options = RunOptions(launcher="torchrun", extra=extra)
    plan = TunePlan(AXES, out=tmp_path / f"node{node_rank}", repeats=repeats)
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=1024, backend=backend)
    tuner = Tuner(spec, options, plan, ["collbench", "tune"], lambda meta: None, lambda line: None)
    tuner.grid()
    return tuner, launched


def test_nodes_with_and_without_rows_meet_at_the_same_ports(tmp_path, monkeypatch):
    """--backend auto on this GPU-less host: "gloo" on every node, so no choices pass on
    any (before, node 0 took its rows' "nccl" and ran one the others never joined)."""
    first, on_node0 = _walk(tmp_path, 0, monkeypatch)
    second, on_node1 = _walk(tmp_path, 1, monkeypatch)
    assert first.backend() == "nccl" and second.backend() == "auto"  # rows on node 0 only
    assert on_node0 == on_node1
    ports = [port for port, _ in on_node0]
    assert len(ports) == 5 * 2  # the baseline and 4 settings, 2 repeats each
    assert len(set(ports)) == len(ports)  # no two sweeps of the tune share a port
    assert ports[0] == 29500  # the baseline's first sweep: the port as given


def test_the_port_depends_on_the_setting_index_repeat_and_kind_alone():
    repeats = 3
    ports = [round_port(29500, index, slot, repeats) for index in range(50) for slot in range(7)]
    assert len(set(ports)) == len(ports)
    assert round_port(29500, 0, 0, repeats) == 29500
    assert round_port(29500, 1, 0, repeats) == 29500 + repeats + 1 + 3  # halving: 3 rounds
    # never past the last port: a huge tune wraps round to the given port
    assert all(29500 <= round_port(29500, index, 2, 5) <= 65535 for index in range(0, 9000, 7))


@pytest.mark.parametrize("node_rank", [0, 1])
def test_every_node_runs_the_choices_pass_and_node_0_records_it(tmp_path, monkeypatch, node_rank):
    """--backend nccl: every node runs the choices pass (its ranks are part of it), at the
    port after the setting's full sweeps; only node 0 turns NCCL's debug output on."""
    _, launched = _walk(tmp_path, node_rank, monkeypatch, repeats=1, backend="nccl")
    choices = [port for port, name in launched if name == "run"]
    assert len(choices) == 5  # one per setting, on either node
    assert choices[:2] == [round_port(29500, 0, 1, 1), round_port(29500, 1, 1, 1)]
    assert (tmp_path / f"node{node_rank}" / "nccl-debug").is_dir() == (node_rank == 0)
