"""The SoC around the core: AXI4 pieces, the DMA engine, the control registers (``csr``) over their map
(``regmap``), the command sequencer, the on-chip move engine, the SoC block (``system``) and, for
testbenches only, a DRAM model and the simulation top with it (``sim_system``)."""
