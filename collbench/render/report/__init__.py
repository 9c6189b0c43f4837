"""`collbench report` and `predict --html` (render/predict.py): the report as data and drawn
(document.py), built from runs (build.py) with its comparison (compare.py), fits and model
curves (fit.py), Tuning (tune_section.py) and Doctor (doctor_section.py, doctor_charts.py)
sections."""
