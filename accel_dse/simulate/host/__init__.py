"""The host-port path of ``simulate`` (``--host-port``, a debug path): tiled runs written to the
buffers through the host port. ``driver``, ``layout`` (GEMM tiles as buffer words), ``job_files``
(the files the driver and the testbench exchange) and ``testbench`` (the cocotb side)."""
