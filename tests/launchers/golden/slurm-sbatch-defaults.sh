#!/bin/bash
# collbench sweep on Slurm: submit with `sbatch THIS_FILE`, as often as you like.
# Each job's rank 0 writes a new run directory, the --out below with the job id
# appended (-JOBID), which every node must see; Slurm writes the job's output to
# collbench-JOBID.out in the directory it is submitted from.
#SBATCH --job-name=collbench
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=30
#SBATCH --output=collbench-%j.out

srun --kill-on-bad-exit=1 PYTHON -m collbench sweep --launcher none --rank-env slurm --collective all_reduce,all_gather --min-bytes 1K --max-bytes 64M --dtype bfloat16 --op sum --placement both --warmup 10 --iters 50 --check --rank-stat avg --backend auto --timeout 300 --repeats 3 --knob NCCL_ALGO=Ring --knob NCCL_MIN_NCHANNELS=4 --topology dgx-h100 --out /shared/results/run-1-${SLURM_JOB_ID}

