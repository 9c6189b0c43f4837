"""tune's choices pass: the debug environment points NCCL at one file per process in the
setting's folder, and those files come back as choices.jsonl lines (what NCCL used per
collective and size). The lines are written to NCCL 2.24's format; no GPU here."""

import json

from collbench.run.tune.choices import choices_env, collect_choices

LINE = "gpu{node}:{pid}:{pid} [0] NCCL INFO AllReduce: {size} Bytes -> Algo {algo} proto SIMPLE channel{{Lo..Hi}}={{0..7}}"


def test_debug_env_names_a_file_per_process_and_keeps_the_users_logging(tmp_path):
    env = choices_env(tmp_path, {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "INIT"})
    assert env["NCCL_DEBUG"] == "INFO"
    assert set(env["NCCL_DEBUG_SUBSYS"].split(",")) >= {"INIT", "TUNING"}
    assert env["NCCL_DEBUG_FILE"] == str(tmp_path.absolute() / "nccl-%h-%p.log")


def test_debug_files_become_one_line_per_collective_size_and_choice(tmp_path):
    (tmp_path / "nccl-gpu0-11.log").write_text(
        "\n".join(
            [
                "gpu0:11:11 [0] NCCL INFO NCCL version 2.24.3",
                LINE.format(node=0, pid=11, size=1024, algo="TREE"),
                LINE.format(node=0, pid=11, size=1024, algo="TREE"),
                LINE.format(node=0, pid=11, size=4194304, algo="RING"),
            ]
        )
    )
    (tmp_path / "other.txt").write_text(LINE.format(node=1, pid=12, size=8, algo="RING"))
    out = tmp_path / "choices.jsonl"
    assert collect_choices(tmp_path, "abc123", out) == 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["size_bytes"], line["algorithm"], line["count"]) for line in lines] == [
        (1024, "tree", 2),
        (4194304, "ring", 1),
    ]
    assert {line["setting"] for line in lines} == {"abc123"}
    assert {(line["collective"], line["protocol"], line["channels"]) for line in lines} == {
        ("all_reduce", "simple", 8)
    }
