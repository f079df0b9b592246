"""The compiler: a GEMM's buffer tiling as the RTL runs it (``plan``), its command program and DRAM layout
(``program``: what the RTL executes and :mod:`perf_model.program_timing` times), and the programs of a chain
of GEMMs whose outputs stay on chip (``chain``)."""
