"""The CLI tests run commands with `tests.helpers.collbench` (in this process, the default) or
`tests.helpers.collbench_process` (a real `python -m collbench`, where a test needs one)."""
