"""The expected duration of a simulation: cycles over the speed measured on the build, op by op."""

from __future__ import annotations

from accel_dse.simulate.runner.eta import duration, expectation, measured_speed, op_poll, record_speed, speed_estimate


def test_the_speed_of_a_run_is_the_next_runs_expectation(tmp_path):
    assert measured_speed(tmp_path) is None
    assert "no speed measured on this build yet" in expectation(1000, None)
    record_speed(tmp_path, 12_000, 4.0)
    assert measured_speed(tmp_path) == 3000.0
    assert expectation(90_000, 3000.0) == "90,000 cycles to simulate, about 30 s at 3,000 cycles/s (measured)"
    record_speed(tmp_path, 0, 4.0)  # nothing simulated: the measurement is kept
    assert measured_speed(tmp_path) == 3000.0


def test_before_any_run_the_speed_is_estimated_from_the_arrays_size():
    """The fit goes through the measured idle-machine speeds (docs/simulate.md): Verilator 275,700
    cycles/s at 16x16 and 10,500 at 128x32; Icarus ~8,000 at 4x4 and ~115 at 16x16."""
    assert speed_estimate("verilator", 256) == 275_700
    assert abs(speed_estimate("verilator", 4096) / 10_500 - 1) < 0.01
    assert abs(speed_estimate("icarus", 256) / 115 - 1) < 0.02
    assert speed_estimate("verilator", 2048) < speed_estimate("verilator", 1024)
    line = expectation(1_000_000, None, 20_000.0)
    assert line.startswith("1,000,000 cycles to simulate, about 50 s at an estimated 20,000 cycles/s")
    assert "first run measures it" in line
    assert expectation(90_000, 3000.0, 20_000.0).endswith("(measured)")  # a measured speed wins


def test_durations_read_well():
    assert [duration(s) for s in (5, 89, 600, 7200)] == ["5 s", "89 s", "10.0 min", "2.0 h"]


def test_each_finished_op_is_said_once_in_order():
    finished: set[int] = set()
    lines: list[str] = []
    poll = op_poll(["a", "b", "c"], [100, 100, 200], lambda i: i in finished, lines.append)
    poll()
    assert lines == []
    finished.update({0, 1})
    poll()
    poll()
    assert [line.split(" (")[0] for line in lines] == ["finished op 1/3: a", "finished op 2/3: b"]
    finished.add(2)
    poll()
    assert lines[-1].startswith("finished op 3/3: c (") and "left" not in lines[-1]
