"""A design's figures on a workload, above the compiler: the walk of the program the compiler emits.

``one_program`` puts a design's one-program walk (``perf_model.compiler.network_figures``) into
its totals where the design runs the workload as one program; ``design_table`` totals the
vectorised evaluator's designs x ops per design (``evaluate_designs``, the sweep's hot path) and
``one_design`` is the one-design API over the same code (``evaluate``, ``evaluate_op``)."""
