from stormwatch.dashboard import DashboardState, Style, graph_svg, page, text_table

STYLE = Style(colour=False, good_score=0.8, bad_score=0.3)


def _state() -> DashboardState:
    state = DashboardState()
    state.update("topology_snapshots", {
        "window_start_ms": 0, "window_end_ms": 10_000, "services": ["user", "gateway", "llm-inference"],
        "entry_points": ["user"], "depth": 2,
        "edges": '[{"caller": "user", "callee": "gateway", "calls": 9, "errors": 0},'
                 ' {"caller": "gateway", "callee": "llm-inference", "calls": 9, "errors": 3}]'})
    state.update("health", {"entity": {"key": "service:llm-inference"}, "window_end_ms": 10_000, "score": 0.2})
    state.update("breaker_decisions", {"entity": {"key": "service:llm-inference"}, "window_end_ms": 10_000,
                                       "state": "OPEN", "admitted_share": 0.0})
    return state


def test_the_graph_colours_services_by_health_and_rings_them_by_breaker_state():
    svg = graph_svg(_state())
    assert 'data-service="llm-inference" data-breaker="OPEN"' in svg
    assert 'data-service="gateway" data-breaker="CLOSED"' in svg
    assert svg.count("<line") == 2


def test_the_table_and_page_show_every_service():
    state = _state()
    table = text_table(state, STYLE)
    assert "llm-inference" in table and "OPEN" in table and "0.20" in table
    assert "gateway" in table
    assert "<svg" in page(state, STYLE) and 'http-equiv="refresh"' in page(state, STYLE)
