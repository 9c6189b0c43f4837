#!/bin/bash
# collbench sweep on Slurm, as submitted by collbench sweep --launcher slurm (submitit);
# each task runs: PYTHON -m collbench sweep --launcher none --rank-env slurm --collective all_reduce,all_gather --min-bytes 1K --max-bytes 64M --dtype bfloat16 --op sum --placement both --warmup 10 --iters 50 --check --rank-stat avg --backend auto --timeout 300 --repeats 3 --knob NCCL_ALGO=Ring --knob NCCL_MIN_NCHANNELS=4 --topology dgx-h100 --out /shared/results/run-1
#SBATCH --job-name=collbench
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --partition=h100
#SBATCH --account=bringup
#SBATCH --qos=high
#SBATCH --constraint=ib
#SBATCH --time=90
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --reservation=fabric
#SBATCH --output=/shared/results/run-1/slurm/%j_0_log.out
#SBATCH --error=/shared/results/run-1/slurm/%j_0_log.err
#SBATCH --open-mode=append

export COLLBENCH_LAUNCH='{"run_id":"run-1","launcher":"slurm","command_line":["collbench","sweep","-c","all_reduce,all_gather"],"world_size":32}'
export COLLBENCH_STATUS_DIR=/shared/results/run-1/ranks
export COLLBENCH_LOG_DIR=/shared/results/run-1/logs
export SUBMITIT_EXECUTOR=slurm
export SUBMITIT_LOG_LEVEL=WARNING

srun --kill-on-bad-exit=1 --unbuffered --output /shared/results/run-1/slurm/%j_%t_log.out --error /shared/results/run-1/slurm/%j_%t_log.err PYTHON -u -m submitit.core._submit /shared/results/run-1/slurm

