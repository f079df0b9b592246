"""The expected duration of a simulation: cycles over the speed measured on the build, op by op."""

from __future__ import annotations

from accel_dse.simulate.runner.eta import duration, expectation, measured_speed, op_poll, record_speed


def test_the_speed_of_a_run_is_the_next_runs_expectation(tmp_path):
    assert measured_speed(tmp_path) is None
    assert "no speed measured on this build yet" in expectation(1000, None)
    record_speed(tmp_path, 12_000, 4.0)
    assert measured_speed(tmp_path) == 3000.0
    assert expectation(90_000, 3000.0) == "90,000 cycles to simulate, about 30 s at 3,000 cycles/s (measured)"
    record_speed(tmp_path, 0, 4.0)  # nothing simulated: the measurement is kept
    assert measured_speed(tmp_path) == 3000.0


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
