"""`collbench tune` (pure): which settings to measure next (search), the winner per size range
(select), tuning from runs already measured (from_runs), and what it writes: tune.json and
best.env (outputs), nccl_tuner.conf (tuner_conf, tuner_conf_rules)."""
