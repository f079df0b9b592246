"""Files copied verbatim into every export: a cocotb testbench and its runner script.

They import only the standard library, numpy and cocotb (never ``accel_dse``), and read
everything design-specific from the export's ``design.json``, so an export directory
re-verifies its Verilog on any machine with Python, cocotb, numpy and a simulator.
"""
