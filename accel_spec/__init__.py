"""The accelerator's specification: the floor every other package reads, importing nothing of the project.

* :mod:`accel_spec.config`: ``ArrayConfig`` (one design) and ``Dataflow``, with their rules;
* :mod:`accel_spec.errors`: ``AccelDseError`` and its subclasses;
* :mod:`accel_spec.number_formats`: the operand and accumulator formats;
* :mod:`accel_spec.isa`: the command encoding the RTL decodes and the compiler emits, and its timing
  constants (AXI beats, DMA bursts in flight, the DRAM model's latency);
* :mod:`accel_spec.vector_isa`: the vector unit's op codes, registers and timing constants;
* :mod:`accel_spec.pod_config`: ``SystemConfig`` and ``Split`` (a system of chips and a job's split);
* :mod:`accel_spec.text`: text from users and files made safe to print, integers parsed strictly.

Standard library only.
"""
