"""`collbench tune`: launch a sweep per setting (launch.py, the Slurm driver in slurm.py),
choose from runs already measured (from_runs.py), check a result (verify.py); plan.py says
what a tune searches, choices.py reads what NCCL chose, workload.py prices a training job."""
