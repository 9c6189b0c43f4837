"""launchers/ and analysis/ install as collbench.launchers / collbench.analysis, never top level."""

import subprocess
import sys
import zipfile

import pytest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-w", str(out), str(root)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return next(out.glob("collbench-*.whl"))


def test_wheel_maps_packages_under_collbench(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "collbench/launchers/local.py" in names
    assert "collbench/analysis/bandwidth.py" in names
    assert "collbench/topologies/__init__.py" in names
    assert "collbench/collectives/all_reduce.py" in names
    top = {name.split("/")[0] for name in names}
    assert not top & {"launchers", "analysis", "topologies", "tests", "benchmarks"}


def test_regular_install_imports_outside_the_source_tree(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(wheel)], check=True, capture_output=True)
    code = ("import collbench, collbench.launchers.local, collbench.analysis.bandwidth;"
            "print(collbench.__file__)")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert str(venv) in done.stdout
    top_level = subprocess.run([str(python), "-c", "import launchers"], capture_output=True,
                               cwd=tmp_path)
    assert top_level.returncode != 0
