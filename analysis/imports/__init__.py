"""nccl-tests / rccl-tests logs (pure): parsed into records (nccl_logs, text and -J
JSON), turned into collbench rows (nccl_rows), and what NCCL chose per size from its debug
output (nccl_choice)."""
