"""`collbench doctor` verdicts (pure): the vocabulary (findings), expectations and bars (expect),
the majority-of-repeats rule (judge), per-round verdicts (verdicts) and the whole fleet (fleet)."""
