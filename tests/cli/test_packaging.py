"""launchers/ and analysis/ install as collbench.launchers / collbench.analysis, never top level."""

import subprocess
import sys
import sysconfig
import zipfile

import pytest

pytestmark = pytest.mark.slow  # pip builds a wheel and installs it into a fresh environment


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return next(out.glob("collbench-*.whl"))


def test_wheel_maps_packages_under_collbench(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "collbench/launchers/local.py" in names
    assert "collbench/analysis/fit/hockney.py" in names
    assert "collbench/topologies/__init__.py" in names
    assert "collbench/core/collectives/base.py" in names
    for layer in ("core", "store", "bench", "run", "render", "cli"):
        assert f"collbench/{layer}/__init__.py" in names
    top = {name.split("/")[0] for name in names}
    assert not top & {"launchers", "analysis", "topologies", "tests", "benchmarks"}


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A venv holding only the wheel, with this interpreter's packages (torch, numpy...)
    on its path but without their .pth hooks, so an editable install of collbench here
    cannot stand in for the wheel. One for the module: the tests below only run it (a venv
    and a pip install cost ~4 s each time)."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    pth = __import__("pathlib").Path(site.stdout.strip()) / "_host_packages.pth"
    pth.write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
        check=True,
        capture_output=True,
    )
    return venv


def test_regular_install_imports_outside_the_source_tree(venv, tmp_path):
    python = venv / "bin" / "python"
    code = (
        "import collbench, collbench.launchers.local, collbench.core.bandwidth;"
        "print(collbench.__file__)"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert str(venv) in done.stdout
    top_level = subprocess.run(
        [str(python), "-c", "import launchers"], capture_output=True, cwd=tmp_path
    )
    assert top_level.returncode != 0


def test_regular_install_runs_a_sweep_from_the_source_checkout(venv, tmp_path):
    """Quick start: `pip install .` then `collbench sweep` in the clone. The ranks run
    `python -m collbench.bench.worker` there, which imports the checkout's collbench/ first."""
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            str(venv / "bin" / "collbench"),
            "sweep",
            "-c",
            "all_reduce",
            "-b",
            "8",
            "-e",
            "8",
            "-n",
            "1",
            "--repeats",
            "1",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "# Out of bounds values : 0 OK" in done.stdout
