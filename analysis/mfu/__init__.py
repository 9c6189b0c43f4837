"""The training-MFU estimator (pure): workloads, their compute and memory, the inputs it prices
with (inputs, gemm_prices), the estimate (estimate), several fabrics at once (fabrics) and the
warnings about inputs that do not apply (checks)."""
