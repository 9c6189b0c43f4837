"""`collbench report` and `predict --html`: the report as data and drawn (document.py), built
from runs (build.py) with its comparison (compare.py, ratio_charts.py), fits and model curves
(fit.py), Tuning (tune_section.py) and Doctor (doctor_section.py, doctor_charts.py) sections,
and the fabric comparison of `predict --html` (predict.py)."""
