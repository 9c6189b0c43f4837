"""Ground truth for the fitter: a two-"node" fabric with a known rate.

Two network namespaces joined by a veth pair, `tc tbf` on both ends at a known rate, a
2-rank all-reduce sweep across it, then `collbench fit`: the fitted bandwidth must land on
the shaped rate's TCP goodput. This is how we know the fitter measures the fabric.
Needs root, `ip`, `unshare` and `tc`; skipped elsewhere with the reason.
"""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import rows_of
from tests.netns import reason_to_skip, torchrun_pair, two_nodes

pytestmark = pytest.mark.slow  # network namespaces, tc shaping and real sweeps

# tbf counts whole Ethernet frames: a 1500-byte MTU frame is 1514 bytes on the veth and
# carries 1448 bytes of TCP payload (20 IP + 20 TCP + 12 timestamp option bytes of headers).
GOODPUT_FRACTION = 1448 / 1514
SWEEP = [
    "-c",
    "all_reduce",
    "-b",
    "256K",
    "-e",
    "16M",
    "-n",
    "4",
    "-w",
    "1",
    "--timeout",
    "120",
    "--repeats",
    "1",
    "--quiet",
]


# 200 and 400 Mbit/s land 2-4% under the goodput, run after run. 800 Mbit/s is past what
# this 2-vCPU VM's gloo ranks sustain steadily: six runs landed from -2% to -11% (gloo
# reduces and copies between transfers, and the vCPUs are shared), which says more about
# the box than about the fitter, so it is not asserted.
@pytest.mark.parametrize("rate_mbit", [200, 400])
def test_fitted_bandwidth_is_the_shaped_rate(tmp_path, rate_mbit):
    reason = reason_to_skip(shaping=True)
    if reason:
        pytest.skip(reason)
    goodput_gbps = rate_mbit * 1e6 / 8 / 1e9 * GOODPUT_FRACTION
    # The shaped rate is a ceiling: a busy neighbour on this 2-vCPU box can only make the
    # ranks slower (a run under load once fitted 0.088 for 0.0956). So a run that comes out
    # slow is measured once more; one that beats the ceiling fails at once.
    for attempt in range(2):
        group = _fitted_group(tmp_path / f"run{attempt}", rate_mbit)
        if group["busbw_peak_gbps"] >= goodput_gbps * 0.95:
            break
    # 2-rank all-reduce: busbw = algbw x 2(n-1)/n = bytes each rank sends per second
    assert group["busbw_peak_gbps"] == pytest.approx(goodput_gbps, rel=0.05), (group, goodput_gbps)


def _fitted_group(out, rate_mbit):
    with two_nodes(rate_mbit) as nodes:
        results = torchrun_pair(nodes, out, SWEEP, port=29581)
    for code, _, stderr in results:
        assert code == 0, stderr
    assert len(rows_of(out)) == 7
    done = collbench("fit", str(out), "--json")
    assert done.returncode == 0, done.stderr
    (group,) = json.loads(done.stdout)
    assert (group["collective"], group["world_size"]) == ("all_reduce", 2)
    return group
