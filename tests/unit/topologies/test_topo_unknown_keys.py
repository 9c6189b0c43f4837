"""A typo'd or misplaced key in a topology file is named, with its field path and the closest
known field, in every section of the schema, before any "is required" about the field it
was meant to be."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from collbench.topologies.loader import load_topology
from collbench.topologies.schema import (
    Accelerator,
    ScaleOut,
    ScaleUp,
    Topology,
    TopologyError,
    to_dict,
)

SECTIONS = {"": Topology, "accelerator": Accelerator, "scale_up": ScaleUp, "scale_out": ScaleOut}


def _full() -> dict:
    """dgx-h100 as a file holds it: every section, every field set."""
    return to_dict(load_topology("dgx-h100"))


def _renamed(section: str, key: str, new: str) -> dict:
    data = _full()
    target = data[section] if section else data
    target[new] = target.pop(key)
    return data


def _error(tmp_path, data: dict) -> str:
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)
    return str(caught.value)


def _typo(name: str) -> str:
    """The key with one letter dropped: 'nic_gbits_s' -> 'nic_gbit_s'."""
    cut = max(1, len(name) - 3)
    return name[:cut] + name[cut + 1 :]


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (section, item.name)
        for section, cls in SECTIONS.items()
        for item in dataclasses.fields(cls)
        if item.name not in ("origin", "sources")
    ],
)
def test_every_field_typo_names_the_unknown_key_and_the_field_meant(tmp_path, section, key):
    typo = _typo(key)
    message = _error(tmp_path, _renamed(section, key, typo))
    path = f"{section}.{typo}" if section else typo
    meant = f"{section}.{key}" if section else key
    assert message.startswith(f"{path}: "), message
    assert f"(did you mean {meant}?)" in message
    assert "is required" not in message


def test_the_issue_s_nic_gbits_s_typo(tmp_path):
    message = _error(tmp_path, _renamed("scale_out", "nic_gbits_s", "nic_gbit_s"))
    assert message == (
        "scale_out.nic_gbit_s: 400.0 is not a known field of scale_out "
        "(did you mean scale_out.nic_gbits_s?)"
    )


def test_a_field_in_the_wrong_section_says_where_it_belongs(tmp_path):
    data = _full()
    data["scale_out"].pop("nic_gbits_s")
    data["scale_up"]["nic_gbits_s"] = 400
    message = _error(tmp_path, data)
    assert message == (
        "scale_up.nic_gbits_s: 400 is not a field of scale_up: it belongs at scale_out.nic_gbits_s"
    )


def test_a_field_of_two_sections_names_both(tmp_path):
    data = _full()
    data["latency_us"] = 2.7
    message = _error(tmp_path, data)
    assert message == (
        "latency_us: 2.7 is not a field at the top level: "
        "it belongs at scale_up.latency_us or scale_out.latency_us"
    )


def test_an_unknown_key_without_a_close_match_lists_the_section_s_fields(tmp_path):
    data = _full()
    data["accelerator"]["vendor"] = "NVIDIA"
    message = _error(tmp_path, data)
    assert message == (
        "accelerator.vendor: 'NVIDIA' is not a known field of accelerator "
        "(known: name, peak_bf16_tflops, peak_fp8_tflops, memory_gib, hbm_gbytes_s, "
        "sm_count, matmul_fraction, matmul_fraction_fp8, matmul_sustained, peak_fp32_tflops, "
        "peak_tf32_tflops)"
    )


def test_a_top_level_typo(tmp_path):
    message = _error(tmp_path, _renamed("", "scale_out", "scaleout"))
    assert message.startswith("scaleout: ")
    assert message.endswith("is not a known field at the top level (did you mean scale_out?)")


def test_a_typo_d_source_path_suggests_the_field(tmp_path):
    data = copy.deepcopy(_full())
    data["sources"]["scale_up.bandwith_gbytes_s"] = data["sources"].pop(
        "scale_up.bandwidth_gbytes_s"
    )
    message = _error(tmp_path, data)
    assert message == (
        "sources: 'scale_up.bandwith_gbytes_s' is not a field path of a topology "
        "(did you mean scale_up.bandwidth_gbytes_s?)"
    )
