"""`collbench tune verify` with NCCL_TUNER_PLUGIN in the environment, on real gloo ranks:
the default's and best.env's rank processes run without the plugin and its config, the
nccl_tuner.conf setting's with both (each run's meta.json records the environment its ranks
had), and the warning says so. gloo ignores NCCL's variables; what is checked is what each
setting's ranks were given."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of

pytestmark = pytest.mark.slow  # real ranks per setting

PLUGIN = "/opt/nccl/libnccl-tuner-example.so"


def test_verify_gives_the_tuner_plugin_only_to_the_conf_setting(tmp_path):
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    spec = {"collectives": ["all_reduce"], "min_bytes": 1024, "max_bytes": 4096, "factor": 4.0}
    knobs = {"GLOO_SOCKET_IFNAME": "lo"}
    best = {"collective": "all_reduce", "min_bytes": 0, "max_bytes": 65535, "knobs": knobs}
    document = {"kind": "tune", "settings": [], "best": [best], "env": {"knobs": knobs}}
    (tuned / "tune.json").write_text(json.dumps({**document, "spec": spec}))
    (tuned / "best.env").write_text("export GLOO_SOCKET_IFNAME=lo\n")
    (tuned / "nccl_tuner.conf").write_text("allreduce,0,65535,ring,simple,0,-1,-1\n")
    out = tmp_path / "verified"
    env = {"NCCL_TUNER_PLUGIN": PLUGIN, "NCCL_TUNER_CONFIG_FILE": "/elsewhere.conf"}
    done = collbench(
        "tune", "verify", str(tuned), "--out", str(out), "-n", "2", "-w", "1",
        "--nproc", "2", "--repeats", "1", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "collbench: warning: the environment loads a tuner plugin" in done.stderr
    settings = json.loads((out / "verify.json").read_text())["settings"]
    assert [entry["status"] for entry in settings] == ["ok", "ok", "ok"]
    given = [meta_of(out / entry["run_dir"])["knobs"] for entry in settings]
    for ranks_env in given[:2]:
        assert "NCCL_TUNER_PLUGIN" not in ranks_env, ranks_env
        assert "NCCL_TUNER_CONFIG_FILE" not in ranks_env, ranks_env
    assert given[2]["NCCL_TUNER_PLUGIN"] == PLUGIN
    assert given[2]["NCCL_TUNER_CONFIG_FILE"] == str((tuned / "nccl_tuner.conf").absolute())
