"""Analytic TPU-style performance model (see perf_model.timing for the RTL timing contract)."""
