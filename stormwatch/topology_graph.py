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
    # Calls that repeated an earlier attempt of the same logical call (stormwatch_edges `retries`).
    retries: int = 0

    @property
    def amplification(self) -> float:
        """Attempts per logical call: calls / (calls - retries); 1.0 without calls."""
        return self.calls / (self.calls - self.retries) if self.calls > self.retries else 1.0


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
                           callee_virtual=e.callee_virtual, retries=e.retries,
                           amplification=round(e.amplification, 4))
        for (a, b), product in path_amplification(graph).items():
            graph.edges[a, b]["path_amplification"] = round(product, 4)
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


def path_amplification(graph: nx.DiGraph) -> dict[tuple[str, str], float]:
    """Per edge, the end-to-end amplification of the calls over it: the largest product of the edges'
    `amplification` along a call path from an entry point (a service nobody calls) through that edge. A
    gateway retrying twice over an orchestrator retrying three times is up to 6x at the leaf. Edges that
    close a cycle (found depth-first from the entry points, then from any service left) do not extend
    a path, so a cycle cannot multiply without end."""
    acyclic = nx.DiGraph()
    acyclic.add_nodes_from(graph)
    state: dict[str, int] = {}  # 1 on the current depth-first path, 2 done
    starts = sorted(n for n in graph if graph.in_degree(n) == 0) + sorted(graph)
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(sorted(graph.successors(start))))]
        while stack:
            node, successors = stack[-1]
            nxt = next(successors, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                continue  # closes a cycle
            else:
                acyclic.add_edge(node, nxt)
                if nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(graph.successors(nxt)))))
    reach = {n: 1.0 for n in acyclic}
    products = {}
    for node in nx.topological_sort(acyclic):
        for succ in acyclic.successors(node):
            product = reach[node] * graph.edges[node, succ]["amplification"]
            products[(node, succ)] = product
            reach[succ] = max(reach[succ], product)
    for a, b in graph.edges:
        products.setdefault((a, b), reach[a] * graph.edges[a, b]["amplification"])
    return products


def _event(kind: str, key: tuple[str, str], first_seen_ms: int, last_seen_ms: int) -> dict:
    return {"event": kind, "caller": key[0], "callee": key[1], "first_seen_ms": first_seen_ms,
            "last_seen_ms": last_seen_ms}
