from stormwatch.topology_graph import EdgeSeen, TopologyTracker


def _edge(caller, callee, calls=1, retries=0):
    return EdgeSeen(caller, callee, False, calls, 0, 10.0, retries)


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
                                    "callee_virtual": False, "retries": 0, "amplification": 1.0,
                                    "path_amplification": 1.0, "first_seen_ms": 10}


def test_a_cycle_has_no_depth_but_never_loops():
    snapshot, _ = TopologyTracker().observe(0, 10, [_edge("a", "b"), _edge("b", "a")])
    assert snapshot["depth"] is None and len(snapshot["edges"]) == 2


def test_amplification_multiplies_along_each_call_path():
    # The gateway sends each request twice (3 of 6 retries: 2x), the orchestrator each call three times
    # (4 of 6: 3x): up to 6x at the leaf, while a sibling path without retries stays at the gateway's 2x.
    snapshot, _ = TopologyTracker().observe(0, 10, [
        _edge("user", "gateway", 3), _edge("gateway", "orchestrator", 6, 3), _edge("orchestrator", "llm", 6, 4),
        _edge("orchestrator", "search", 2), _edge("search", "llm", 2)])
    edges = {(e["caller"], e["callee"]): e for e in snapshot["edges"]}
    assert edges["gateway", "orchestrator"]["amplification"] == 2.0
    assert edges["orchestrator", "llm"]["amplification"] == 3.0
    assert edges["orchestrator", "llm"]["path_amplification"] == 6.0
    assert edges["search", "llm"]["path_amplification"] == 2.0
    assert edges["user", "gateway"]["path_amplification"] == 1.0


def test_a_cycle_does_not_multiply_amplification_without_end():
    snapshot, _ = TopologyTracker().observe(0, 10, [
        _edge("user", "a"), _edge("a", "b", 4, 2), _edge("b", "a", 4, 2)])
    edges = {(e["caller"], e["callee"]): e for e in snapshot["edges"]}
    assert edges["a", "b"]["path_amplification"] == 2.0
    assert edges["b", "a"]["path_amplification"] == 4.0  # closes the cycle: extends no path further
