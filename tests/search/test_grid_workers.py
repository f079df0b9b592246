"""The grid sampler's chunks scored by worker processes: the same result and table as one process,
and a stop that ends the workers."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from search_testlib import make_space, standin_evaluator

from accel_dse.search.scoring import grid


def test_two_workers_give_the_one_process_result_and_table(tmp_path):
    space = make_space(objectives=["latency", "area"])
    one = grid.grid_search(space, standin_evaluator(space), chunk=37, table=tmp_path / "one.npz")
    two = grid.grid_search(space, standin_evaluator(space), chunk=37, table=tmp_path / "two.npz", workers=2)
    assert space.grid_size() > 4 * 37  # several chunks a worker, merged out of many
    assert two.size == one.size and two.n_feasible == one.n_feasible and one.n_feasible > 0
    assert list(two.index) == list(one.index) and np.array_equal(two.values, one.values)
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
        assert np.array_equal(a[name], b[name]), name


def test_a_stop_while_merging_ends_the_workers():
    space = make_space(objectives=["latency"])
    seen = []

    def stop_after_two(done, size):
        seen.append(done)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grid.grid_search(space, standin_evaluator(space), chunk=25, on_chunk=stop_after_two, workers=2)
    assert seen == [25, 50]
    assert multiprocessing.active_children() == []
