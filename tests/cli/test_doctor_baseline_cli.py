"""collbench doctor --baseline holds the run against the baseline through the one methodology
rule (analysis/rules/methodology.py, DOCTOR_BASELINE): a baseline measured with another
dtype is refused in one line and exit 2; other iterations only warn, and the run is judged."""

import pytest

from tests.helpers import collbench

DOCTOR = ("doctor", "-g", "2", "--repeats", "3", "--size", "1M")


@pytest.mark.slow  # three real 2-rank gloo doctors, ~20 s
def test_doctor_baseline_refuses_another_dtype_and_warns_about_iterations(tmp_path):
    base = tmp_path / "base"
    done = collbench(*DOCTOR, "--out", str(base))
    assert done.returncode in (0, 6), done.stderr  # healthy, or nothing to judge against
    done = collbench(
        *DOCTOR, "--dtype", "bfloat16", "--baseline", str(base), "--out", str(tmp_path / "bf")
    )
    assert done.returncode == 2, done.stderr
    # judged once the rounds are done (the run's rows are kept): its progress, then one line
    assert done.stderr.strip().splitlines()[-1] == (
        f"collbench: error: --baseline {base} and this run ({tmp_path / 'bf'}) measured "
        "differently (dtype 'float32' vs 'bfloat16'); give a baseline doctor run measured "
        "like this one"
    )
    done = collbench(
        *DOCTOR, "--iters", "30", "--baseline", str(base), "--out", str(tmp_path / "it")
    )
    assert done.returncode != 2, done.stderr
    assert (
        f"collbench: warning: --baseline {base} and this run ({tmp_path / 'it'}) measured "
        "differently (iters 20 vs 30): judged against it anyway"
    ) in done.stderr
    assert (tmp_path / "it" / "doctor.json").is_file()
    # another size or ranks per node: refused before any rank starts (issue 41 item 8)
    for other, why in (
        (("--size", "2M"), "measured at 1 MiB and this run at 2 MiB"),
        (("-g", "3"), "measured with 2 ranks per node and this run would have 3"),
    ):
        done = collbench(*DOCTOR, *other, "--baseline", str(base), "--out", str(tmp_path / "x"))
        assert done.returncode == 2 and why in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
