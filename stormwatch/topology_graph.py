"""The service graph of a window, and how it changes: pure logic over per-window edge records.

`TopologyTracker.observe` takes a window's edges (as Flink SQL aggregated them, see
sql/tables/stormwatch_edges.sql) and returns a compact snapshot of the networkx graph plus the
events of edges that appeared or vanished. An edge vanishes after `vanish_after_windows` windows
without a call, so one quiet window does not flap it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx


@dataclass(frozen=True)
class EdgeSeen:
    caller: str
    callee: str
    callee_virtual: bool
    calls: int
    errors: int
    latency_p95_ms: float | None


@dataclass
class _EdgeHistory:
    first_seen_ms: int
    last_seen_ms: int
    quiet_windows: int = 0


@dataclass
class TopologyTracker:
    vanish_after_windows: int = 3
    _edges: dict[tuple[str, str], _EdgeHistory] = field(default_factory=dict)

    def observe(self, window_start_ms: int, window_end_ms: int, edges: list[EdgeSeen]) -> tuple[dict, list[dict]]:
        graph = nx.DiGraph()
        for e in edges:
            graph.add_edge(e.caller, e.callee, calls=e.calls, errors=e.errors, latency_p95_ms=e.latency_p95_ms,
                           callee_virtual=e.callee_virtual)
        events = []
        for key in sorted(graph.edges):
            history = self._edges.get(key)
            if history is None:
                self._edges[key] = _EdgeHistory(window_end_ms, window_end_ms)
                events.append(_event("EDGE_APPEARED", key, window_end_ms, window_end_ms))
            else:
                history.last_seen_ms, history.quiet_windows = window_end_ms, 0
        for key in sorted(set(self._edges) - set(graph.edges)):
            history = self._edges[key]
            history.quiet_windows += 1
            if history.quiet_windows >= self.vanish_after_windows:
                del self._edges[key]
                events.append(_event("EDGE_VANISHED", key, history.first_seen_ms, history.last_seen_ms))
        for event in events:
            event.update(window_start_ms=window_start_ms, window_end_ms=window_end_ms)
        return self._snapshot(graph, window_start_ms, window_end_ms), events

    def _snapshot(self, graph: nx.DiGraph, window_start_ms: int, window_end_ms: int) -> dict:
        roots = sorted(n for n in graph if graph.in_degree(n) == 0)
        return {
            "window_start_ms": window_start_ms,
            "window_end_ms": window_end_ms,
            "services": sorted(graph.nodes),
            "entry_points": roots,
            # Longest call chain, where the graph has no cycle (retries and callbacks can make one).
            "depth": nx.dag_longest_path_length(graph) if nx.is_directed_acyclic_graph(graph) else None,
            "edges": [
                {"caller": a, "callee": b, **graph.edges[a, b],
                 "first_seen_ms": self._edges[(a, b)].first_seen_ms}
                for a, b in sorted(graph.edges)
            ],
        }


def _event(kind: str, key: tuple[str, str], first_seen_ms: int, last_seen_ms: int) -> dict:
    return {"event": kind, "caller": key[0], "callee": key[1], "first_seen_ms": first_seen_ms,
            "last_seen_ms": last_seen_ms}
