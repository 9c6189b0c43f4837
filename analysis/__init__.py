"""Pure analysis code (no torch.distributed, no I/O): figures in, data out.

Sub-packages, by concern (each says what it holds in its own docstring):
  rules    size bands, methodology and the decision rule every verdict shares
  model    cost models: collectives on a fabric, GEMMs on an accelerator
  fit      curve fits of a sweep, their quality, measured against the model
  compare  run-against-run comparison and the CI gate
  imports  nccl-tests / rccl-tests logs as records and rows
  tune     tune's search, selection and the files it writes
  doctor   doctor verdicts
  mfu      the training-MFU estimator

A sub-package imports only the public modules of those below it (pyproject's import
contracts): rules < model < fit, compare, imports < tune, doctor < mfu.
"""
