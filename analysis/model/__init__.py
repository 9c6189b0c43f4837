"""Cost models (pure): what a fabric should give a collective (costmodel) and how long a GEMM
takes on an accelerator (gemm_model). Fit, doctor and mfu price against them."""
