"""The physical figures of a design at its technology node: silicon area (PE, buffers, output stage, memory
system), energy per access, the clock its logic reaches (f_max), the node's gate delay, supply and leakage, and
the fits that calibrate them to Yosys (``*_fit.py``, written by the benches under ``bench/``)."""
