"""What the demo shows: the latest record of each output per entity, as a text table and as an HTML
page with an SVG of the service graph coloured by health (breaker states on the nodes) and the
Pareto front of each service. Pure: records in, text and markup out; the demo feeds it from Kafka.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass, field, replace

from stormwatch.policy import Policy

# ANSI colour codes of the terminal forms.
RED, GREEN, YELLOW, DIM, BOLD = "31", "32", "33", "90", "1"
# Breaker states and how they are drawn: (text colour for the terminal, stroke colour for the page).
BREAKER_COLOURS = {
    "CLOSED": (GREEN, "#2e7d32"),
    "OPEN": (RED, "#c62828"),
    "FORCED_OPEN": (RED, "#c62828"),
    "HALF_OPEN": (YELLOW, "#f9a825"),
    "GRADUAL_RECOVERY": (YELLOW, "#f9a825"),
    "DISABLED": (DIM, "#757575"),
}


@dataclass(frozen=True)
class Style:
    """How text forms colour what they show; score colours follow the policy's thresholds."""

    colour: bool
    good_score: float  # a health score at or above it is green
    bad_score: float  # below it red; yellow between

    @classmethod
    def of(cls, policy: Policy, colour: bool) -> Style:
        # Green where retries are at their most generous tier, red where the breaker opens.
        return cls(colour, good_score=policy.retry.tiers[0].min_score, bad_score=policy.breaker.open_below_score)

    def paint(self, text: str, code: str | None) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def score_code(self, score: float | None) -> str | None:
        if score is None:
            return DIM
        return GREEN if score >= self.good_score else RED if score < self.bad_score else YELLOW

    def score(self, score: float | None) -> str:
        return self.paint("score=n/a" if score is None else f"score={score:.2f}", self.score_code(score))

    def state(self, state: str) -> str:
        return self.paint(state, BREAKER_COLOURS.get(state, (BOLD,))[0])


@dataclass
class DashboardState:
    """The newest record per entity of every output the demo watches."""

    snapshot: dict | None = None
    health: dict[str, dict] = field(default_factory=dict)
    breakers: dict[str, dict] = field(default_factory=dict)
    retry_gates: dict[str, dict] = field(default_factory=dict)
    storms: dict[str, dict] = field(default_factory=dict)
    fronts: dict[str, dict] = field(default_factory=dict)
    scaling: dict[str, dict] = field(default_factory=dict)
    suspects: dict[int, list[dict]] = field(default_factory=lambda: defaultdict(list))
    dead_letters: int = 0

    def update(self, output: str, record: dict) -> None:
        if output == "topology_snapshots":
            if self.snapshot is None or record["window_end_ms"] >= self.snapshot["window_end_ms"]:
                self.snapshot = record
        elif output == "suspects":
            ranked = self.suspects[record["window_end_ms"]]
            ranked.append(record)
            for old in sorted(self.suspects)[:-2]:  # the newest windows are enough to show
                del self.suspects[old]
        elif output == "dead_letters":
            self.dead_letters += 1
        else:
            latest = {"health": self.health, "breaker_decisions": self.breakers, "retry_decisions": self.retry_gates,
                      "storm_decisions": self.storms, "pareto_fronts": self.fronts,
                      "scaling_decisions": self.scaling}[output]
            key = record.get("entity", {}).get("key") or record.get("service")
            if key is not None and record.get("window_end_ms", 0) >= latest.get(key, {}).get("window_end_ms", 0):
                latest[key] = record

    def services(self) -> list[str]:
        names = {k.split(":", 1)[1] for k in self.health if k.startswith("service:")}
        if self.snapshot:
            names |= {s for s in self.snapshot["services"] if s != "user"}
        return sorted(names)

    def top_suspects(self) -> list[dict]:
        if not self.suspects:
            return []
        return sorted(self.suspects[max(self.suspects)], key=lambda s: s["rank"])


def _score(record: dict | None) -> float | None:
    return None if record is None else record.get("score")


def _breaker_state(record: dict | None) -> str:
    return "CLOSED" if record is None else record.get("state", "CLOSED")


def text_table(state: DashboardState, style: Style) -> str:
    lines = [f"{'service':<18}{'health':>8}  {'breaker':<18}{'admit':>6}{'retries':>8}{'replicas':>10}  suspect"]
    suspects = {s["service"]: s for s in state.top_suspects()}
    for service in state.services():
        key = f"service:{service}"
        score = _score(state.health.get(key))
        breaker = state.breakers.get(key)
        gate = state.retry_gates.get(key, {})
        scaling = state.scaling.get(key, {})
        health = style.paint(f"{'n/a' if score is None else f'{score:.2f}':>8}", style.score_code(score))
        name = _breaker_state(breaker)
        share = "" if breaker is None else f"{breaker.get('admitted_share', 1.0) * 100:.0f}%"
        suspect = suspects.get(service)
        mark = "" if suspect is None else f"#{suspect['rank']} {suspect['score']:.2f}" + (" FLAGGED" if suspect["flagged"] else "")
        replicas = "" if not scaling else f"{scaling.get('current_replicas')}->{scaling.get('desired_replicas')}"
        lines.append(f"{service:<18}{health}  {style.paint(f'{name:<18}', BREAKER_COLOURS.get(name, (BOLD,))[0])}"
                     f"{share:>6}{str(gate.get('max_retries', '')):>8}{replicas:>10}  {mark}")
    lines.append(f"dead letters so far: {state.dead_letters}")
    return "\n".join(lines)


def _health_fill(score: float | None) -> str:
    if score is None:
        return "#e0e0e0"
    # Red (0) through yellow to green (1).
    return f"hsl({max(0.0, min(1.0, score)) * 120:.0f}, 70%, 70%)"


def graph_svg(state: DashboardState, width: int = 900, height: int = 420) -> str:
    """The services of the newest graph snapshot in layers by call depth from the entry points."""
    if state.snapshot is None:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60"><text x="10" y="30">' \
               'waiting for the first topology snapshot</text></svg>'
    edges = state.snapshot["edges"]
    edges = json.loads(edges) if isinstance(edges, str) else edges
    depth: dict[str, int] = {s: 0 for s in state.snapshot["entry_points"]}
    for _ in range(len(state.snapshot["services"])):  # longest-path layering, bounded: cycles stop
        for e in edges:
            if e["caller"] in depth and depth.get(e["callee"], -1) < depth[e["caller"]] + 1 <= len(state.snapshot["services"]):
                depth[e["callee"]] = depth[e["caller"]] + 1
    for s in state.snapshot["services"]:
        depth.setdefault(s, 0)
    layers: dict[int, list[str]] = defaultdict(list)
    for s in sorted(depth):
        layers[depth[s]].append(s)
    columns = max(layers) + 1
    pos = {}
    for d, names in layers.items():
        for i, s in enumerate(names):
            pos[s] = (60 + d * (width - 120) / max(columns - 1, 1), (i + 1) * height / (len(names) + 1))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" id="service-graph">']
    for e in edges:
        (x1, y1), (x2, y2) = pos[e["caller"]], pos[e["callee"]]
        colour = "#c62828" if e.get("errors") else "#9e9e9e"
        parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="{colour}" '
                     f'stroke-width="{1 + min(e.get("calls", 0), 1000) / 200:.1f}"/>')
        parts.append(f'<text x="{(x1 + x2) / 2:.0f}" y="{(y1 + y2) / 2 - 4:.0f}" font-size="10" fill="#616161">'
                     f'{e.get("calls", 0)}</text>')
    for s, (x, y) in pos.items():
        key = f"service:{s}"
        breaker = _breaker_state(state.breakers.get(key))
        score = _score(state.health.get(key))
        label = html.escape(s)
        parts.append(f'<g class="service" data-service="{label}" data-breaker="{breaker}">'
                     f'<circle cx="{x:.0f}" cy="{y:.0f}" r="26" fill="{_health_fill(score)}" '
                     f'stroke="{BREAKER_COLOURS.get(breaker, ("", "#000"))[1]}" stroke-width="4"/>'
                     f'<text x="{x:.0f}" y="{y + 42:.0f}" font-size="12" text-anchor="middle">{label}</text>'
                     f'<text x="{x:.0f}" y="{y + 4:.0f}" font-size="11" text-anchor="middle">'
                     f'{"" if score is None else f"{score:.2f}"}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def front_svg(front: dict, width: int = 280, height: int = 200) -> str:
    """One service's instances: QPS across, latency up; the front joined by a line."""
    points = [(p, True) for p in front.get("front", [])] + [(d["point"], False) for d in front.get("dominated", [])]
    qps_max = max([p["qps"] for p, _ in points] + [1e-9])
    lat_max = max([p["latency_ms"] for p, _ in points] + [1e-9])

    def xy(p: dict) -> tuple[float, float]:
        return 30 + p["qps"] / qps_max * (width - 50), height - 25 - p["latency_ms"] / lat_max * (height - 45)

    service = html.escape(str(front.get("service", "")))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="front" '
             f'data-service="{service}"><text x="5" y="14" font-size="12">{service}</text>'
             f'<text x="{width - 60}" y="{height - 5}" font-size="10">QPS →</text>'
             f'<text x="2" y="{height / 2:.0f}" font-size="10">ms</text>']
    line = sorted((xy(p) for p, on in points if on))
    if len(line) > 1:
        parts.append('<polyline fill="none" stroke="#1565c0" points="'
                     + " ".join(f"{x:.0f},{y:.0f}" for x, y in line) + '"/>')
    for p, on in points:
        x, y = xy(p)
        parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="4" fill="{"#1565c0" if on else "#bdbdbd"}">'
                     f'<title>{html.escape(str(p.get("instance")))}: {p["qps"]:.1f} qps, {p["latency_ms"]:.0f} ms</title>'
                     '</circle>')
    parts.append("</svg>")
    return "".join(parts)


def page(state: DashboardState, style: Style, refresh_s: int = 2) -> str:
    """The demo's page; it reloads itself every refresh_s seconds."""
    fronts = "".join(front_svg(f) for _, f in sorted(state.fronts.items()))
    table = html.escape(text_table(state, replace(style, colour=False)))
    return (f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_s}">'
            '<title>stormwatch</title></head><body style="font-family: sans-serif">'
            '<h1>stormwatch</h1><h2>Service graph: fill = health score, ring = breaker state</h2>'
            f'{graph_svg(state)}<h2>QPS–latency Pareto fronts</h2><div id="fronts">{fronts or "no fronts yet"}</div>'
            f'<h2>Decisions</h2><pre id="table">{table}</pre></body></html>')
