"""Scoring designs: the performance model over a space's weighted workloads (``evaluator``), the sweep
objective and its guards (``objective``) and the exhaustive grid with the vectorised model (``grid``)."""
