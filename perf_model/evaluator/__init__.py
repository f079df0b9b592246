"""The vectorised evaluator: many designs x a workload's ops in one numpy pass. ``problem`` flattens
design-op pairs, ``tiling`` chooses buffer tiles and loop orders, ``transfers``, ``run_classes``,
``sequencer_periods`` and ``schedule`` count cycles and traffic in closed form (the walk of
:mod:`perf_model.program_timing`, without walking), ``reuse_links`` decides which layer links stay on chip,
``block`` puts it together per block, ``design_table`` totals it per design (``evaluate_designs``, the
sweep's hot path) and ``one_design`` is the one-design API over the same code."""
