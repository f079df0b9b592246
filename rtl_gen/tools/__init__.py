"""The tools around the RTL: deterministic Verilog export (``verilog_export``), Yosys synthesis figures
with their cache (``synth``), Verilator lint (``lint``) and the FPGA flow, Yosys and nextpnr (``fpga``)."""
