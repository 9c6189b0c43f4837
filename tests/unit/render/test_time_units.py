"""Times read in a unit that fits them: a 20-minute modelled step is '19.73 min', not
'1,184,058.444 ms' (issue 38 item 7)."""

import pytest

from collbench.core.units import format_time, time_unit
from collbench.render.tune import workload_lines


@pytest.mark.parametrize(
    "seconds, text",
    [
        (1184.058444, "19.73 min"),
        (0.8123, "812.3 ms"),
        (0.0005, "0.500 ms"),
        (12.5, "12.50 s"),
        (5.123 * 3600, "5.123 h"),
        (20000 * 3600, "20,000 h"),
    ],
)
def test_a_time_reads_in_its_unit_with_4_significant_digits(seconds, text):
    name, scale, decimals = time_unit(seconds)
    assert f"{seconds / scale:,.{decimals}f} {name}" == text == format_time(seconds)


def test_the_workload_table_gives_each_time_column_its_unit():
    def setting(name, step_s, baseline=False):
        times = {"step_time_s": step_s, "exposed_comm_s": 0.0123, "comm_s": 0.5}
        return {"setting": name, "baseline": baseline, "mfu": 0.4, **times}

    job = {"model": "custom", "params": 7e9, "dp_bucket_mb": 25, "tp": 8, "pp": 1, "dp": 4}
    job |= {"zero": 1, "seq": 4096, "global_batch": 512}
    settings = [setting("default", 1184.058444, baseline=True), setting("NCCL_ALGO=Tree", 1180.0)]
    workload = {"workload": job, "topology": "t", "settings": settings, "chosen": "NCCL_ALGO=Tree"}
    workload["export"] = {"setting": "NCCL_ALGO=Tree", "text": "exported"}
    lines = workload_lines({**workload, "losses": [], "notes": []})
    table = lines[1:4]  # the header, then every setting: the default and best.env's
    assert " ".join(table[0].split()).endswith("step min exposed comm ms all comm ms MFU")
    assert table[1].split()[2:] == ["19.73", "12.30", "500.0", "40.00%"]
    assert table[2].split()[1:] == ["(best.env)", "19.67", "12.30", "500.0", "40.00%"]
