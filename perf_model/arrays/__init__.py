"""The vectorised model's inputs: many designs (:class:`~perf_model.arrays.designs.DesignArrays`) and a
workload's ops (:class:`~perf_model.arrays.ops.OpArrays`) as structs of numpy arrays, one element per
design or op. The floor above the RTL contracts: the physical figures, the FPGA model, the evaluator
and the compiler all read designs through it."""
