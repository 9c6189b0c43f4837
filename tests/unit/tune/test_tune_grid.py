"""tune's settings layer: --knob parsing and checking, the grid, process groups, env."""

from __future__ import annotations

import pytest

from collbench.core.errors import EXIT_USAGE, SpecError
from collbench.core.knobs import reads_knob
from collbench.core.tune_catalog import CATALOG, KNOWN_NAMES, is_numeric
from collbench.core.tune_grid import (
    BASELINE,
    DEFAULT_MAX_SETTINGS,
    KnobAxis,
    Setting,
    build_grid,
    check_axis,
    conf_file_warnings,
    conf_variables,
    grid_size,
    join_values,
    parse_knob,
    parse_knobs,
    setting_env,
    split_values,
)


def _error(texts: list[str], backend: str | None = None) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_knobs(texts, backend)
    error = caught.value
    assert error.exit_code == EXIT_USAGE
    assert "\n" not in str(error)
    return error


# --- parsing -----------------------------------------------------------------------------


def test_parse_knob_splits_values_in_order():
    assert parse_knob("NCCL_ALGO=Ring,Tree") == KnobAxis("NCCL_ALGO", ("Ring", "Tree"))
    assert parse_knob("NCCL_ALGO=Ring, Tree").values == ("Ring", "Tree")


def test_escaped_comma_stays_inside_one_value():
    axis = parse_knob(r"NCCL_SOCKET_IFNAME==eth0\,=eth1,ib")
    assert axis.values == ("=eth0,=eth1", "ib")
    assert split_values(join_values(axis.values)) == list(axis.values)


def test_per_collective_and_exclusion_values_have_no_comma():
    axis = parse_knob("NCCL_ALGO=allreduce:tree;allgather:ring,^Tree")
    assert axis.values == ("allreduce:tree;allgather:ring", "^Tree")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("NCCL_ALGO", "is not NAME=V1,V2"),
        ("=Ring", "is not NAME=V1,V2"),
        ("nccl_algo=Ring", "did you mean NCCL_ALGO?"),
        ("NCCL-ALGO=Ring", "names no environment variable"),
        ("FOO=1", "does not name a communication knob"),
        ("NCLL_ALGO=Ring", "not name a communication knob; did you mean NCCL_ALGO?"),
        ("NCCL_ALGO=", "no values"),
        ("NCCL_ALGO= ", "no values"),
        ("NCCL_ALGO=Ring,,Tree", "empty value"),
        ("NCCL_ALGO=Ring,", "empty value"),
    ],
)
def test_malformed_knob_is_a_one_line_usage_error(text, reason):
    error = _error([text])
    assert error.field == "--knob" and error.value == text
    assert reason in str(error)


def test_duplicate_knob_is_refused():
    error = _error(["NCCL_ALGO=Ring", "NCCL_PROTO=LL", "NCCL_ALGO=Tree"])
    assert "repeats NCCL_ALGO" in str(error)


@pytest.mark.parametrize(
    "text",
    [
        "NCCL_ALGO=Ring,ring",  # NCCL compares algorithm names without case
        "NCCL_PROTO=LL,LL",
        "NCCL_BUFFSIZE=4M,4194304",  # the same bytes
        "GLOO_SOCKET_IFNAME=fast,fast",
    ],
)
def test_duplicate_value_is_refused(text):
    assert "twice" in str(_error([text]))


def test_interface_names_are_case_sensitive_so_not_duplicates():
    axes, _ = parse_knobs(["GLOO_SOCKET_IFNAME=eth0,ETH0"])
    assert axes[0].values == ("eth0", "ETH0")


# --- values against the catalog ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "NCCL_ALGO=Ring,Tree,CollnetDirect,CollnetChain,NVLS,NVLSTree,PAT",
        "NCCL_ALGO=ring,nvlstree,collnetdirect",
        "NCCL_ALGO=^Tree",
        r"NCCL_ALGO=Ring\,Tree",
        r"NCCL_ALGO=ring\,collnetdirect;allreduce:tree\,collnetdirect;broadcast:ring",
        "NCCL_ALGO=allreduce:tree;allgather:ring",
        "NCCL_PROTO=LL,LL128,Simple",
        "NCCL_PROTO=^LL128",
        r"NCCL_PROTO=LL\,Simple;allreduce:^LL",
        "NCCL_PROTO=^LL128;allreduce:LL128",
        "NCCL_MIN_NCHANNELS=1,64",
        "NCCL_MAX_NCHANNELS=2,8,32",
        "NCCL_MIN_CTAS=1,32",
        "NCCL_MAX_CTAS=16",
        "NCCL_NTHREADS=64,128,256,512",
        "NCCL_CROSS_NIC=0,1,2",
        "NCCL_NVLS_ENABLE=0,1",
        "NCCL_P2P_LEVEL=LOC,NVL,PIX,PXB,PHB,SYS,3",
        "NCCL_NET_GDR_LEVEL=PHB,SYS",
        r"NCCL_SOCKET_IFNAME=eth,=eth0,^docker,^=docker0,=eth0\,eth1",
        r"NCCL_IB_HCA=mlx5,=mlx5_0:1\,mlx5_1:1,^=mlx5_3",
        "NCCL_IB_TIMEOUT=18,22",
        "NCCL_IB_QPS_PER_CONNECTION=1,4",
        "NCCL_TUNER_CONFIG_FILE=/tmp/a.conf,/tmp/b.conf",
        "RCCL_MSCCL_ENABLE=0,1",
        "RCCL_MSCCLPP_ENABLE=0,1",
        "RCCL_MSCCLPP_THRESHOLD=1M,16M",
        "GLOO_SOCKET_IFNAME=fast,slow,nosuch",
    ],
)
def test_values_the_backend_accepts(text):
    axes, _ = parse_knobs([text])
    assert len(axes[0].values) >= 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("NCCL_ALGO=Ring,Rign", "names no Tree/Ring"),
        ("NCCL_ALGO=^", "names no"),
        ("NCCL_ALGO=alreduce:tree", "names no collective 'alreduce'"),
        ("NCCL_ALGO=allreduce:tree;ring", "without a collective"),
        ("NCCL_ALGO=LL", "names no Tree/Ring"),  # a protocol is no algorithm
        ("NCCL_PROTO=Ring", "names no LL/LL128/Simple"),
        ("NCCL_MAX_NCHANNELS=0", "outside 1..64"),
        ("NCCL_MAX_NCHANNELS=128", "outside 1..64"),
        ("NCCL_MAX_NCHANNELS=four", "not a whole number"),
        ("NCCL_MIN_CTAS=65", "outside"),
        ("NCCL_NTHREADS=32", "outside 64..512"),
        ("NCCL_NTHREADS=1024", "outside 64..512"),
        ("NCCL_NTHREADS=100", "multiple of 32"),
        ("NCCL_CROSS_NIC=3", "not one of 0, 1, 2"),
        ("NCCL_NVLS_ENABLE=yes", "not one of"),
        ("NCCL_P2P_LEVEL=nvl", "not a path level"),  # NCCL compares levels with case
        ("NCCL_NET_GDR_LEVEL=FAR", "not a path level"),
        ("NCCL_BUFFSIZE=4Q", "is not a size"),
        ("NCCL_BUFFSIZE=0", "positive"),
        ("NCCL_SOCKET_IFNAME=a_name_longer_than_15", "no interface name prefix"),
        ("NCCL_IB_HCA=mlx5_0:x", "device[:port]"),
        ("NCCL_IB_RETRY_CNT=8", "outside 0..7"),
        ("GLOO_SOCKET_IFNAME=eth 0", "no interface name"),
        ("RCCL_MSCCL_ENABLE=2", "not one of 0, 1"),
    ],
)
def test_values_the_backend_rejects(text, reason):
    error = _error([text])
    assert reason in str(error), str(error)


def test_buffsize_is_exported_as_the_integer_nccl_reads():
    # NCCL reads NCCL_BUFFSIZE with strtoll: "4M" would silently be 4 bytes.
    axes, _ = parse_knobs(["NCCL_BUFFSIZE=4M,1048576,2K"])
    assert axes[0].values == ("4194304", "1048576", "2048")


def test_algorithm_spelling_is_kept_as_given():
    axes, _ = parse_knobs(["NCCL_ALGO=ring,NVLSTree"])
    assert axes[0].values == ("ring", "NVLSTree")


# --- names collbench does not know ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("NCCL_ALGOS=Ring", "NCCL_ALGO"),
        ("NCCL_MAX_NCHANNEL=4", "NCCL_MAX_NCHANNELS"),
        ("NCCL_SOCKET_IFNAM=eth0", "NCCL_SOCKET_IFNAME"),
        ("GLOO_SOCKET_IFNAM=eth0", "GLOO_SOCKET_IFNAME"),
        ("RCCL_MSCCL_ENABLED=1", "RCCL_MSCCL_ENABLE"),
    ],
)
def test_typo_of_a_known_knob_is_an_error_with_the_suggestion(text, suggestion):
    assert f"did you mean {suggestion}?" in str(_error([text]))


def test_real_knob_close_to_a_catalog_one_is_no_typo():
    # NCCL_MAX_P2P_NCHANNELS is its own variable, close to NCCL_MAX_NCHANNELS.
    axes, warnings = parse_knobs(["NCCL_MAX_P2P_NCHANNELS=4", "NCCL_LL128_NTHREADS=640"])
    assert [axis.name for axis in axes] == ["NCCL_MAX_P2P_NCHANNELS", "NCCL_LL128_NTHREADS"]
    assert warnings == []


def test_unknown_nccl_name_far_from_any_is_a_warning():
    axes, warnings = parse_knobs(["NCCL_SOMETHING_NEW_IN_2_40=1,2"])
    assert axes[0].values == ("1", "2")
    assert len(warnings) == 1 and "NCCL_SOMETHING_NEW_IN_2_40" in warnings[0]
    assert "unchecked" in warnings[0]


def test_other_prefixes_pass_unchecked_and_silently():
    _, warnings = parse_knobs(["OMP_NUM_THREADS=1,4", "TORCH_NCCL_BLOCKING_WAIT=0,1"])
    assert warnings == []


# --- backend mismatch warnings ----------------------------------------------------------


def test_gloo_ignores_nccl_knobs_one_line_each():
    _, warnings = parse_knobs(["NCCL_ALGO=Ring", "NCCL_PROTO=LL"], backend="gloo")
    assert len(warnings) == 2
    assert all("\n" not in line and "not by gloo" in line for line in warnings)


def test_nccl_ignores_rccl_and_gloo_knobs():
    _, warnings = parse_knobs(["RCCL_MSCCL_ENABLE=0,1", "GLOO_SOCKET_IFNAME=eth0"], "nccl")
    assert warnings == [
        "--knob RCCL_MSCCL_ENABLE does not apply to --backend nccl "
        "(RCCL_MSCCL_ENABLE is read by rccl, not by nccl)",
        "--knob GLOO_SOCKET_IFNAME does not apply to --backend nccl "
        "(GLOO_SOCKET_IFNAME is read by gloo, not by nccl)",
    ]


@pytest.mark.parametrize("backend", [None, "auto", "nccl", "rccl"])
def test_nccl_knobs_apply_to_nccl_rccl_or_an_unknown_backend(backend):
    assert parse_knobs(["NCCL_ALGO=Ring"], backend)[1] == []


def test_rccl_reads_nccl_knobs_and_its_own():
    assert parse_knobs(["NCCL_PROTO=LL", "RCCL_MSCCLPP_ENABLE=1"], "rccl")[1] == []


def test_check_axis_alone_normalises_and_warns():
    axis, warnings = check_axis(KnobAxis("NCCL_BUFFSIZE", ("1M",)), backend="gloo")
    assert axis.values == ("1048576",)
    assert warnings and "not by gloo" in warnings[0]


# --- the catalog ------------------------------------------------------------------------


def test_catalog_backends_reuse_core_knobs():
    assert reads_knob("NCCL_ALGO") == ("nccl", "rccl")
    assert reads_knob("RCCL_MSCCL_ENABLE") == ("rccl",)
    assert reads_knob("GLOO_SOCKET_IFNAME") == ("gloo",)
    assert reads_knob("OMP_NUM_THREADS") is None


def test_numeric_knobs_are_the_ones_a_descent_steps_through():
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_NTHREADS", "NCCL_BUFFSIZE"):
        assert is_numeric(name)
    for name in ("NCCL_ALGO", "NCCL_CROSS_NIC", "NCCL_IB_SL", "NCCL_SOCKET_IFNAME", "NCCL_XYZ"):
        assert not is_numeric(name)


def test_catalog_and_known_names_are_environment_names():
    for name in [*CATALOG, *KNOWN_NAMES]:
        assert name == name.upper() and name.startswith(("NCCL_", "RCCL_", "GLOO_"))


# --- settings and the grid --------------------------------------------------------------


def test_baseline_is_first_then_product_first_knob_slowest():
    axes, _ = parse_knobs(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=Simple,LL,LL128"])
    grid = build_grid(axes)
    assert grid[0] is BASELINE and grid[0].label == "baseline"
    assert [setting.label for setting in grid[1:]] == [
        "NCCL_ALGO=Ring NCCL_PROTO=Simple",
        "NCCL_ALGO=Ring NCCL_PROTO=LL",
        "NCCL_ALGO=Ring NCCL_PROTO=LL128",
        "NCCL_ALGO=Tree NCCL_PROTO=Simple",
        "NCCL_ALGO=Tree NCCL_PROTO=LL",
        "NCCL_ALGO=Tree NCCL_PROTO=LL128",
    ]
    assert len({setting.id for setting in grid}) == len(grid) == 1 + grid_size(axes)


def test_setting_id_is_stable_and_independent_of_order():
    one = Setting((("NCCL_PROTO", "LL"), ("NCCL_ALGO", "Ring")))
    two = Setting.from_mapping({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"})
    assert one == two and one.id == two.id and len(one.id) == 12
    assert one.knobs == (("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "LL"))
    assert one.as_dict() == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert BASELINE.id == Setting.from_mapping({}).id == "44136fa355b3"  # sha256 of "{}"
    assert (
        Setting.from_mapping({"NCCL_ALGO": "Tree"}).id
        != Setting.from_mapping({"NCCL_ALGO": "Ring"}).id
    )


def test_setting_refuses_a_knob_twice():
    with pytest.raises(ValueError):
        Setting((("NCCL_ALGO", "Ring"), ("NCCL_ALGO", "Tree")))


def test_grid_over_max_settings_is_refused_unless_not_a_grid_search():
    axes, _ = parse_knobs(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=Simple,LL,LL128"])
    assert len(build_grid(axes, max_settings=6)) == 7  # the baseline is not counted
    with pytest.raises(SpecError) as caught:
        build_grid(axes, max_settings=5)
    assert caught.value.field == "--max-settings" and caught.value.exit_code == EXIT_USAGE
    assert "6 settings" in str(caught.value) and "--search" in str(caught.value)
    assert len(build_grid(axes, max_settings=5, exhaustive=False)) == 7


def test_default_max_settings_is_the_signature_default():
    axes = [KnobAxis("NCCL_MAX_NCHANNELS", tuple(str(n) for n in range(1, 65)))]
    assert grid_size(axes) == DEFAULT_MAX_SETTINGS
    assert len(build_grid(axes)) == DEFAULT_MAX_SETTINGS + 1
    with pytest.raises(SpecError):
        build_grid([*axes, KnobAxis("NCCL_ALGO", ("Ring", "Tree"))])


def test_max_settings_must_be_positive():
    with pytest.raises(SpecError):
        build_grid([], max_settings=0)


def test_no_axes_is_the_baseline_alone():
    assert build_grid([]) == (BASELINE,)
    assert grid_size([]) == 0


def test_setting_env_overrides_and_baseline_keeps_the_environment():
    base = {"NCCL_ALGO": "Tree", "PATH": "/bin"}
    assert setting_env(BASELINE, base) == base
    env = setting_env(Setting.from_mapping({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}), base)
    assert env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "PATH": "/bin"}
    assert base == {"NCCL_ALGO": "Tree", "PATH": "/bin"}  # not changed in place


# --- NCCL config files (their contents; reading them is bench.provenance's) -------------


def test_conf_variables_read_as_nccl_reads_them():
    text = "# a comment\nNCCL_ALGO=Tree\nno equals sign\nNCCL_DEBUG=WARN\nNCCL_ALGO=Ring\n"
    text += "NCCL_SOCKET_IFNAME==ens1f0\n"
    assert conf_variables(text) == {
        "NCCL_ALGO": "Tree",  # NCCL never overrides a variable already set: first wins
        "NCCL_DEBUG": "WARN",
        "NCCL_SOCKET_IFNAME": "=ens1f0",
    }


def test_conf_file_setting_a_tuned_knob_is_reported():
    files = {"/etc/nccl.conf": "NCCL_ALGO=Tree\nNCCL_DEBUG=WARN\n", "/home/u/.nccl.conf": ""}
    axes, _ = parse_knobs(["NCCL_ALGO=Ring,Tree"])
    warnings = conf_file_warnings(files, axes, base_env={})
    assert warnings == [
        "/etc/nccl.conf sets NCCL_ALGO=Tree: the baseline runs with it, "
        "each setting's own value overrides it"
    ]
    # The environment wins over the file: then the baseline does not run with it.
    assert conf_file_warnings(files, axes, base_env={"NCCL_ALGO": "Ring"}) == []


def test_a_tuner_plugin_the_environment_loads_is_warned_about():
    """Issue 40 item 8: tune inherited NCCL_TUNER_PLUGIN in silence."""
    axes, _ = parse_knobs(["NCCL_ALGO=Ring,Tree"])
    (line,) = conf_file_warnings({}, axes, base_env={"NCCL_TUNER_PLUGIN": "libnccl-tuner.so"})
    assert line.startswith("the environment loads a tuner plugin (NCCL_TUNER_PLUGIN=libnccl")
    assert conf_file_warnings({}, axes, base_env={"NCCL_TUNER_PLUGIN": "none"}) == []
