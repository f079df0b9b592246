"""The compute core: the PE, the systolic array with its skew, the controller that runs a tiled GEMM
out of the buffers, the output stage (requantisation), the buffer geometry and datapath pieces, and
the accelerator top that joins them behind a host port (``accelerator``)."""
