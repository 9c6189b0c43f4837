"""collbench finalize on a run that is final but lacks rows.parquet: mended, whatever the state."""

import pandas as pd
import pytest

from collbench.core.errors import SpecError
from collbench.run.finalize import finalize_run
from tests.rows import make_row, write_run


def test_a_completed_run_without_its_parquet_gets_it(tmp_path):
    from collbench.core.spec import SweepSpec
    from collbench.run.status import describe_run
    from collbench.store.job import Job

    rows = [make_row(size_bytes=1024 << index, repeat=0) for index in range(3)]
    run = write_run(tmp_path / "run", rows, {"run_id": "run", "state": "completed", "spec": {}})
    Job(SweepSpec().with_backend("gloo"), run, "run", "local", 2).save()
    assert not (run / "rows.parquet").exists()
    missing = f"rows.parquet missing: run `collbench finalize {run}` to write it"
    assert describe_run(run).endswith(f"state: completed\n{missing}")
    said = finalize_run(run)
    assert missing not in describe_run(run)
    assert (
        said
        == f"run {run}: already final (state completed); wrote its missing rows.parquet (3 row(s))"
    )
    assert len(pd.read_parquet(run / "rows.parquet")) == 3
    with pytest.raises(SpecError, match="already final .*nothing to do"):
        finalize_run(run)


@pytest.mark.parametrize("where", ["other/rows.parquet", "other/x.csv", "run/x.csv"])
def test_side_files_named_inside_a_run_directory_are_not_written(tmp_path, where):
    from collbench.render.export import complete_side_files
    from collbench.store.side_files import SideFiles

    run = write_run(tmp_path / "run", [make_row()], {"run_id": "run", "state": "running"})
    write_run(tmp_path / "other", [make_row()], {"run_id": "other", "state": "completed"})
    SideFiles(csv=str(tmp_path / where), collectives=("all_reduce",)).save(run)  # hand-edited
    said = finalize_run(run, complete_side_files)
    assert f"not rewritten: exports.json: '{tmp_path / where}' is inside" in said
    assert not (tmp_path / where).exists()
