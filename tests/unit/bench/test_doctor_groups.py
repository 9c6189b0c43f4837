"""How the doctor makes a round's groups: one split_group where the world group has a bound
device (NCCL; no GPU here, so a stand-in for torch.distributed records the calls), else
new_group for every group on every rank; gloo's real path runs in
tests/dist/test_doctor_arrivals.py."""

from types import SimpleNamespace

from collbench.bench.doctor_rounds import NEW_GROUP, SPLIT_GROUP, StageGroups, make_groups
from collbench.core.doctor_plan import Layout


class FakeDist:
    def __init__(self, bound: object, split_fails: bool = False) -> None:
        self.calls: list = []
        world = SimpleNamespace(bound_device_id=bound)
        self.distributed_c10d = SimpleNamespace(_get_default_group=lambda: world)
        self.split_fails = split_fails

    def split_group(self, split_ranks):
        self.calls.append(("split", split_ranks))
        if self.split_fails:
            raise RuntimeError("backend does not support splitting")
        return "split-pg"

    def new_group(self, ranks):
        self.calls.append(("new", ranks))
        return f"pg{ranks}"

    def destroy_process_group(self, pg):
        self.calls.append(("destroy", pg))


GROUPS = [(0, 1), (2, 3)]


def test_one_split_for_the_round_where_the_world_has_a_device():
    dist = FakeDist(bound="cuda:0")
    assert make_groups(dist, 2, GROUPS) == ("split-pg", SPLIT_GROUP)
    assert dist.calls == [("split", [[0, 1], [2, 3]])]


def test_without_a_device_or_a_splitting_backend_every_rank_makes_every_group():
    for dist in (FakeDist(bound=None), FakeDist(bound="cuda:0", split_fails=True)):
        assert make_groups(dist, 2, GROUPS) == ("pg[2, 3]", NEW_GROUP)
        assert [call for call in dist.calls if call[0] == "new"] == [
            ("new", [0, 1]),
            ("new", [2, 3]),
        ]


def test_a_round_s_groups_live_while_it_runs_and_are_destroyed_after():
    dist = FakeDist(bound=None)
    groups = StageGroups(dist, rank=0)
    first = groups.enter("bisect", 1, GROUPS)
    assert groups.enter("bisect", 1, GROUPS) is first  # a level's repeats: made once
    groups.enter("intra", 0, GROUPS)  # another round: the first one's group goes
    groups.close()
    assert [call for call in dist.calls if call[0] == "destroy"] == [
        ("destroy", "pg[0, 1]"),
        ("destroy", "pg[0, 1]"),
    ]
    record = groups.record()
    assert record["method"] == NEW_GROUP and record["groups"] == {"bisect": 2, "intra": 2}
    assert set(record["seconds"]) == {"bisect", "intra"}


def test_layout_host_of_every_rank():
    layout = Layout.from_hosts(["a", "a", "b", "c", "b"])
    assert layout.host_of == {0: "a", 1: "a", 2: "b", 3: "c", 4: "b"}
