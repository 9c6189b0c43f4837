"""`collbench tune verify` with a tuner plugin (run.tune.verify.verify_sides): the plugin
goes only with its config. The default and best.env's setting run without NCCL_TUNER_PLUGIN
and NCCL_TUNER_CONFIG_FILE (NCCL's example plugin would give their every call 1 channel and
inflate the realised gain); only the nccl_tuner.conf setting names both; a plugin the
environment loads is a warning (pure)."""

from pathlib import Path

from collbench.core.tune_grid import BASELINE, Setting, setting_env
from collbench.run.tune.verify import verify_sides

BEST = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
PLUGIN = "/opt/nccl/libnccl-tuner-example.so"


def _conf(tmp_path: Path) -> Path:
    conf = tmp_path / "nccl_tuner.conf"
    conf.write_text("allreduce,0,65535,tree,simple,0,-1,-1\n")
    return conf


def test_the_plugin_goes_only_with_its_config(tmp_path):
    conf = _conf(tmp_path)
    environ = {"PATH": "/bin", "NCCL_TUNER_PLUGIN": PLUGIN, "NCCL_TUNER_CONFIG_FILE": "/old.conf"}
    sides = verify_sides(BEST, conf, environ)
    default, best, with_conf = sides.settings
    assert default == BASELINE and best == Setting.from_mapping(BEST)
    assert with_conf.as_dict() == {
        "NCCL_TUNER_PLUGIN": PLUGIN,
        "NCCL_TUNER_CONFIG_FILE": str(conf.absolute()),
    }
    envs = [setting_env(setting, sides.base_env) for setting in sides.settings]
    for env in envs[:2]:  # the default and best.env: no plugin, no config
        assert "NCCL_TUNER_PLUGIN" not in env and "NCCL_TUNER_CONFIG_FILE" not in env
        assert env["PATH"] == "/bin"
    assert envs[2]["NCCL_TUNER_PLUGIN"] == PLUGIN
    assert envs[2]["NCCL_TUNER_CONFIG_FILE"] == str(conf.absolute())
    (warning,) = sides.warnings
    assert f"NCCL_TUNER_PLUGIN={PLUGIN}" in warning and "/old.conf" in warning
    assert "run without it" in warning and "NCCL_TUNER_PLUGIN=none" in warning
    assert sides.notes == ()


def test_without_a_plugin_the_conf_is_not_measured_and_nothing_is_stripped(tmp_path):
    environ = {"PATH": "/bin", "NCCL_IB_HCA": "mlx5_0"}
    sides = verify_sides(BEST, _conf(tmp_path), environ)
    assert sides.settings == [BASELINE, Setting.from_mapping(BEST)]
    assert sides.base_env == environ and sides.warnings == ()
    assert sides.notes and "not verified: set NCCL_TUNER_PLUGIN" in sides.notes[0]


def test_a_plugin_without_a_conf_is_still_kept_from_the_default(tmp_path):
    sides = verify_sides(BEST, tmp_path / "nccl_tuner.conf", {"NCCL_TUNER_PLUGIN": PLUGIN})
    assert sides.settings == [BASELINE, Setting.from_mapping(BEST)]
    assert "NCCL_TUNER_PLUGIN" not in sides.base_env and len(sides.warnings) == 1


def test_a_config_alone_is_kept_from_the_default_and_named(tmp_path):
    """NCCL loads libnccl-tuner.so by itself when it finds it: a config in the environment
    would reach the default's plugin."""
    sides = verify_sides(BEST, _conf(tmp_path), {"NCCL_TUNER_CONFIG_FILE": "/old.conf"})
    assert "NCCL_TUNER_CONFIG_FILE" not in sides.base_env
    (warning,) = sides.warnings
    assert "NCCL_TUNER_CONFIG_FILE=/old.conf" in warning
    assert len(sides.settings) == 2 and sides.notes  # no plugin named: the conf is not run
