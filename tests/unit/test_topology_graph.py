from stormwatch.topology_graph import EdgeSeen, TopologyTracker


def _edge(caller, callee, calls=1):
    return EdgeSeen(caller, callee, False, calls, 0, 10.0)


def test_new_edges_appear_once_and_vanish_only_after_quiet_windows():
    tracker = TopologyTracker(vanish_after_windows=2)
    _, events = tracker.observe(0, 10, [_edge("user", "web"), _edge("web", "api")])
    assert [(e["event"], e["caller"], e["callee"]) for e in events] == [
        ("EDGE_APPEARED", "user", "web"), ("EDGE_APPEARED", "web", "api")]
    assert tracker.observe(10, 20, [_edge("user", "web")])[1] == []  # one quiet window: no flap
    _, events = tracker.observe(20, 30, [_edge("user", "web")])
    assert [(e["event"], e["first_seen_ms"], e["last_seen_ms"]) for e in events] == [("EDGE_VANISHED", 10, 10)]
    _, events = tracker.observe(30, 40, [_edge("user", "web"), _edge("web", "api")])
    assert [e["event"] for e in events] == ["EDGE_APPEARED"]


def test_snapshot_names_services_entry_points_depth_and_first_seen():
    tracker = TopologyTracker()
    tracker.observe(0, 10, [_edge("user", "web")])
    snapshot, _ = tracker.observe(10, 20, [_edge("user", "web", 5), _edge("web", "api"), _edge("api", "db")])
    assert snapshot["services"] == ["api", "db", "user", "web"]
    assert snapshot["entry_points"] == ["user"] and snapshot["depth"] == 3
    assert snapshot["edges"][1] == {"caller": "user", "callee": "web", "calls": 5, "errors": 0, "latency_p95_ms": 10.0,
                                    "callee_virtual": False, "first_seen_ms": 10}


def test_a_cycle_has_no_depth_but_never_loops():
    snapshot, _ = TopologyTracker().observe(0, 10, [_edge("a", "b"), _edge("b", "a")])
    assert snapshot["depth"] is None and len(snapshot["edges"]) == 2
