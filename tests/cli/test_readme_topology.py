"""The docs' own topology example (docs/topologies.md) passes `collbench topo validate`
without a warning."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import collbench

TOPOLOGIES = Path(__file__).resolve().parents[2] / "docs" / "topologies.md"


def docs_topology_example() -> str:
    """The YAML block of the docs' Topologies page."""
    text = TOPOLOGIES.read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) == 1, "the Topologies page should hold one YAML example"
    return blocks[0]


def test_docs_topology_example_validates_without_warnings(tmp_path):
    path = tmp_path / "my-cluster.yaml"
    path.write_text(docs_topology_example(), encoding="utf-8")
    done = collbench("topo", "validate", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: my-cluster: 16 x 8 NVIDIA H100 80GB HBM3"), done.stdout
    assert done.stderr == "", done.stderr
