"""The DRAM path of ``simulate``: programs run from DRAM images on the SoC block, like an SoC would.

``driver`` (compile each op, lay out DRAM, run, check), ``image`` (DRAM images and read-back),
``job_files`` (the files the driver and the testbench exchange), ``testbench`` (the cocotb side),
one module per kind of program (``conv``, ``conv_network``, ``network``, ``block`` with ``encoder``
and ``decoder``, ``vector``) and the full-scale sampled check (``sampled``, ``sampled_check``).
"""
