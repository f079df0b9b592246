"""The FPGA model: a design's LUTs, FFs, DSPs and block RAMs (``resources``) and its Fmax (``fmax``) on a
Lattice device without synthesis or place and route, and the sweep's FPGA metrics per device (``metrics``)."""
