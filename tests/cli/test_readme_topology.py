"""The README's own topology example passes `collbench topo validate` without a warning."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import collbench

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_topology_example() -> str:
    """The YAML block of the README's "## Topologies" section."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Topologies\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```yaml\n(.*?)^```", section, re.M | re.S)
    assert len(blocks) == 1, "the Topologies section should hold one YAML example"
    return blocks[0]


def test_readme_topology_example_validates_without_warnings(tmp_path):
    path = tmp_path / "my-cluster.yaml"
    path.write_text(readme_topology_example(), encoding="utf-8")
    done = collbench("topo", "validate", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: my-cluster: 16 x 8 NVIDIA H100 80GB HBM3"), done.stdout
    assert done.stderr == "", done.stderr
