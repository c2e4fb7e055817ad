"""tf_cnn_benchmarks' throughput statistics, against hand-computed values."""

import math

import pytest

from hpcnn.stats import interleaved, speed, throughput


def test_speed_mean_uncertainty_and_jitter():
    s = speed(10, [0.1, 0.2, 0.25, 0.5])  # speeds 100, 50, 40, 20
    assert s.mean == pytest.approx(52.5)
    sd = math.sqrt(((47.5 ** 2) + (2.5 ** 2) + (12.5 ** 2) + (32.5 ** 2)) / 4)
    assert s.uncertainty == pytest.approx(sd / 2)
    # median 45; |deviations| 55, 5, 5, 25 -> median 15
    assert s.jitter == pytest.approx(1.4826 * 15)
    assert str(s) == f"images/sec: 52.5 +/- {sd / 2:.1f} (jitter = {1.4826 * 15:.1f})"


def test_single_step_has_no_spread():
    s = speed(32, [0.5])
    assert (s.mean, s.uncertainty, s.jitter) == (64.0, 0.0, 0.0)


def test_no_steps_is_an_error():
    with pytest.raises(ValueError):
        speed(32, [])


def test_throughput_is_all_images_over_all_time():
    assert throughput(10, [0.1, 0.2, 0.25, 0.5]) == pytest.approx(40 / 1.05)


def test_interleaved_order_puts_every_side_in_every_position_equally_often():
    assert [interleaved(["A", "B"], r) for r in range(4)] == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    orders = [interleaved("ABC", r) for r in range(6)]
    assert orders[:3] == [list("ABC"), list("BCA"), list("CAB")]
    for side in "ABC":
        assert sorted(o.index(side) for o in orders) == [0, 0, 1, 1, 2, 2]
