"""The vectorised evaluator: many designs x a workload's ops in one numpy pass. ``problem`` flattens
design-op pairs, ``tiling`` chooses buffer tiles and loop orders, ``transfers``, ``run_classes``,
``sequencer_periods`` and ``schedule`` count cycles and traffic in closed form (the walk of
:mod:`perf_model.program_timing`, without walking), ``reuse_links`` decides which layer links stay on chip,
``design_ops`` puts it together per block of designs x ops. ``perf_model.figures``, above the
compiler, totals it per design as the program the compiler emits (``evaluate_designs``, ``evaluate``)."""
