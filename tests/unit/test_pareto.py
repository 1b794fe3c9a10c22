import json
import random
import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT
from stormwatch.pareto import FrontPolicy, InstancePoint, front

DOC = tomllib.loads((PROJECT_ROOT / "config" / "policy.toml").read_text())["pareto"]
POLICY = FrontPolicy.from_dict({**DOC, "min_calls_per_instance": 20, "warmup_seconds": 30})
END = 1_000_000


def pt(name, qps, latency, calls=100, first_seen_ms=0):
    return InstancePoint(name, qps, latency, calls, first_seen_ms)


def brute_force(points):
    """The non-dominated points by definition, O(n²); of exact duplicates the first by name."""
    def dominates(a, b):
        return a.qps >= b.qps and a.latency_ms <= b.latency_ms and (a.qps > b.qps or a.latency_ms < b.latency_ms)

    kept = [p for p in points if not any(dominates(q, p) for q in points)]
    firsts = {}
    for p in sorted(kept, key=lambda p: p.instance):
        firsts.setdefault((p.qps, p.latency_ms), p)
    return sorted(firsts.values(), key=lambda p: p.qps)


def random_points(rng, n):
    # Coarse grids make ties in QPS, in latency and in both frequent.
    grid = rng.choice([3, 10, 1000])
    return [pt(f"i{k:04d}", rng.randrange(grid) * 1.5, rng.randrange(grid) * 7.0) for k in range(n)]


def test_the_default_policy_parses():
    p = FrontPolicy.from_dict(DOC)
    assert (p.latency_quantile, p.min_calls_per_instance, p.warmup_seconds) == (
        DOC["latency_quantile"], DOC["min_calls_per_instance"], DOC["warmup_seconds"])


@pytest.mark.parametrize("change, message", [
    ({"latency_quantile": "p50"}, "pareto.latency_quantile"),
    ({"min_calls_per_instance": 0}, "pareto.min_calls_per_instance"),
    ({"min_calls_per_instance": 2.5}, "pareto.min_calls_per_instance"),
    ({"warmup_seconds": -1}, "pareto.warmup_seconds"),
    ({"warmup_seconds": "30"}, "pareto.warmup_seconds"),
    ({"warmup": 30}, "pareto.warmup"),
])
def test_invalid_policies_name_the_key(change, message):
    with pytest.raises(ValueError, match=message):
        FrontPolicy.from_dict({**DOC, **change})


def test_a_missing_key_is_named():
    with pytest.raises(ValueError, match="pareto.warmup_seconds: missing"):
        FrontPolicy.from_dict({k: v for k, v in DOC.items() if k != "warmup_seconds"})


def test_a_simple_front():
    points = [pt("a", 10, 100), pt("b", 20, 150), pt("c", 15, 200), pt("d", 5, 50), pt("e", 20, 300)]
    f = front("svc", 0, END, points, POLICY)
    assert [p.instance for p in f.points] == ["d", "a", "b"]          # QPS ascending
    assert f.max_qps.instance == "b" and f.min_latency.instance == "d"
    assert {d.point.instance: (d.dominated_by.instance, d.reason) for d in f.dominated} == {
        "c": ("b", "DOMINATED"), "e": ("b", "DOMINATED")}


def test_dominated_by_is_the_dominating_front_point_with_the_lowest_latency():
    # x is dominated by both h (more QPS) and m (more QPS, less latency); m has the lower latency.
    points = [pt("h", 100, 90), pt("m", 50, 20), pt("l", 10, 5), pt("x", 40, 95)]
    f = front("svc", 0, END, points, POLICY)
    assert [p.instance for p in f.points] == ["l", "m", "h"]
    assert f.dominated[0].dominated_by.instance == "m"


def test_same_qps_lower_latency_dominates():
    f = front("svc", 0, END, [pt("a", 10, 200), pt("b", 10, 100)], POLICY)
    assert [p.instance for p in f.points] == ["b"]
    assert (f.dominated[0].point.instance, f.dominated[0].reason) == ("a", "DOMINATED")


def test_same_latency_higher_qps_dominates():
    f = front("svc", 0, END, [pt("a", 10, 100), pt("b", 20, 100)], POLICY)
    assert [p.instance for p in f.points] == ["b"] and f.dominated[0].reason == "DOMINATED"


def test_exact_duplicates_the_first_by_name_is_on_the_front():
    f = front("svc", 0, END, [pt("c", 10, 100), pt("a", 10, 100), pt("b", 10, 100)], POLICY)
    assert [p.instance for p in f.points] == ["a"]
    assert [(d.point.instance, d.dominated_by.instance, d.reason) for d in f.dominated] == [
        ("b", "a", "DUPLICATE_OF"), ("c", "a", "DUPLICATE_OF")]


def test_duplicates_of_a_dominated_position_are_dominated_not_duplicates():
    f = front("svc", 0, END, [pt("top", 20, 50), pt("a", 10, 100), pt("b", 10, 100)], POLICY)
    assert [p.instance for p in f.points] == ["top"]
    assert {(d.point.instance, d.dominated_by.instance, d.reason) for d in f.dominated} == {
        ("a", "top", "DOMINATED"), ("b", "top", "DOMINATED")}


@pytest.mark.parametrize("point, reason", [
    (pt("x", 10, 100, calls=19), "TOO_FEW_CALLS"),
    (pt("x", 10, 100, first_seen_ms=END - 29_999), "WARMING_UP"),
    (pt("x", 10, None), "NO_LATENCY"),
    (pt("x", 10, float("nan")), "NO_LATENCY"),
    (pt("x", 10, float("inf")), "NO_LATENCY"),
    # The first failing check names the reason.
    (pt("x", 10, None, calls=0, first_seen_ms=END), "TOO_FEW_CALLS"),
    (pt("x", 10, None, first_seen_ms=END), "WARMING_UP"),
])
def test_exclusions(point, reason):
    f = front("svc", 0, END, [point, pt("ok", 1, 1000)], POLICY)
    assert [(e.point.instance, e.reason) for e in f.excluded] == [("x", reason)]
    assert [p.instance for p in f.points] == ["ok"]


def test_the_boundaries_of_the_exclusions_are_included():
    f = front("svc", 0, END, [pt("x", 10, 100, calls=20, first_seen_ms=END - 30_000)], POLICY)
    assert [p.instance for p in f.points] == ["x"] and not f.excluded


def test_no_warmup_when_warmup_seconds_is_zero():
    pol = FrontPolicy.from_dict({**DOC, "warmup_seconds": 0})
    assert front("svc", 0, END, [pt("x", 10, 100, first_seen_ms=END)], pol).points


def test_empty_input():
    f = front("svc", 0, END, [], POLICY)
    assert f.points == () and f.max_qps is None and f.min_latency is None
    d = f.to_dict()
    assert d["front"] == [] and d["max_qps"] is None and d["counts"] == {
        "instances": 0, "front": 0, "dominated": 0, "excluded": 0}


def test_everything_excluded():
    f = front("svc", 0, END, [pt("a", 10, None), pt("b", 10, 100, calls=1)], POLICY)
    assert f.points == () and f.max_qps is None and len(f.excluded) == 2


def test_duplicate_instance_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        front("svc", 0, END, [pt("a", 1, 1), pt("a", 2, 2)], POLICY)


def test_to_dict_is_json_ready_and_complete():
    points = [pt("a", 10, 100), pt("b", 20, 150), pt("c", 15, 200), pt("w", 30, 10, calls=1)]
    d = front("svc", 5, END, points, POLICY).to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert (d["service"], d["window_start_ms"], d["window_end_ms"], d["latency_quantile"]) == ("svc", 5, END, "p99")
    assert [p["instance"] for p in d["front"]] == ["a", "b"]
    assert d["front"][0] == {"instance": "a", "qps": 10, "latency_ms": 100, "calls": 100, "first_seen_ms": 0}
    assert d["dominated"] == [{"point": {"instance": "c", "qps": 15, "latency_ms": 200, "calls": 100,
                                         "first_seen_ms": 0}, "dominated_by": "b", "reason": "DOMINATED"}]
    assert d["excluded"][0]["reason"] == "TOO_FEW_CALLS" and d["excluded"][0]["point"]["instance"] == "w"
    assert d["max_qps"]["instance"] == "b" and d["min_latency"]["instance"] == "a"
    assert d["counts"] == {"instances": 4, "front": 2, "dominated": 1, "excluded": 1}


@pytest.mark.parametrize("seed", range(300))
def test_matches_the_brute_force_front(seed):
    rng = random.Random(seed)
    points = random_points(rng, rng.choice([1, 2, 5, 30, 200]))
    f = front("svc", 0, END, points, POLICY)
    assert list(f.points) == brute_force(points)
    on_front = {p.instance for p in f.points}
    assert len(f.points) + len(f.dominated) == len(points) and not f.excluded
    for d in f.dominated:
        by, p = d.dominated_by, d.point
        assert by.instance in on_front and by.qps >= p.qps and by.latency_ms <= p.latency_ms
        assert d.reason == ("DUPLICATE_OF" if (by.qps, by.latency_ms) == (p.qps, p.latency_ms) else "DOMINATED")
        # The lowest-latency front point among those that dominate (or equal) it.
        candidates = [q for q in f.points if q.qps >= p.qps and q.latency_ms <= p.latency_ms]
        assert by == min(candidates, key=lambda q: q.latency_ms)
    # Along the front QPS and latency both strictly ascend.
    assert all(a.qps < b.qps and a.latency_ms < b.latency_ms for a, b in zip(f.points, f.points[1:]))


@pytest.mark.parametrize("seed", range(50))
def test_shuffled_input_gives_the_same_front(seed):
    rng = random.Random(seed)
    points = random_points(rng, 100)
    points += [pt(f"x{k}", rng.randrange(10), None if k % 2 else 5.0, calls=k) for k in range(10)]
    expected = front("svc", 0, END, points, POLICY).to_dict()
    for _ in range(5):
        rng.shuffle(points)
        assert front("svc", 0, END, points, POLICY).to_dict() == expected
