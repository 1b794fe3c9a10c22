"""The traffic generator: determinism, well-formed trace trees, OTLP/JSON messages, faults and errors.

Structure is checked on the decoded messages, read by reference/otlp.py, so the encoding is
under test along with the generator.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict

import pytest

from connectors.otlp import encode_json
from reference.otlp import spans_of_request
from stormwatch.traffic.faults import FaultWindow, Params
from stormwatch.traffic.generator import DEFAULT_START_UNIX_NANO, TraceGenerator
from stormwatch.traffic.otlp import to_export_requests
from stormwatch.traffic.topology import Call, Instance, Service, Topology

SERVER, CLIENT, INTERNAL = 2, 3, 1


def _messages(generator: TraceGenerator, rate_per_s: float, duration_s: float, **kwargs) -> list[dict]:
    spans = [span for trace in generator.generate(rate_per_s, duration_s) for span in trace]
    return to_export_requests(spans, **kwargs)


def _spans(messages: list[dict]):
    return [span for message in messages for span in spans_of_request(message)]


def _attributes(messages: list[dict]) -> dict[str, dict[str, str | int]]:
    """Span id -> its attributes, int64 values back to ints."""
    out = {}
    for message in messages:
        for rs in message["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    out[s["spanId"]] = {a["key"]: _value(a["value"]) for a in s.get("attributes", [])}
    return out


def _value(value: dict) -> str | int:
    return int(value["intValue"]) if "intValue" in value else value["stringValue"]


def _elapsed_s(unix_nano: int) -> float:
    return (unix_nano - DEFAULT_START_UNIX_NANO) / 1e9


@pytest.fixture(scope="module")
def messages():
    return _messages(TraceGenerator(seed=3), rate_per_s=4, duration_s=30)


@pytest.fixture(scope="module")
def spans(messages):
    return _spans(messages)


@pytest.fixture(scope="module")
def by_id(spans):
    return {(s.trace_id, s.span_id): s for s in spans}


@pytest.fixture(scope="module")
def children(spans):
    out = defaultdict(list)
    for s in spans:
        if s.parent_span_id:
            out[(s.trace_id, s.parent_span_id)].append(s)
    return out


def test_same_seed_same_bytes_other_seed_other_bytes():
    def encoded(seed):
        return [encode_json(m) for m in _messages(TraceGenerator(seed=seed), rate_per_s=5, duration_s=5)]

    assert encoded(11) == encoded(11)
    assert encoded(11) != encoded(12)


def test_ids_are_lowercase_hex_and_not_zero(spans):
    for s in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", s.trace_id) and set(s.trace_id) != {"0"}
        assert re.fullmatch(r"[0-9a-f]{16}", s.span_id) and set(s.span_id) != {"0"}
        assert s.parent_span_id is None or re.fullmatch(r"[0-9a-f]{16}", s.parent_span_id)


def test_span_ids_are_unique_and_parents_in_the_same_trace(spans, by_id):
    assert len(by_id) == len(spans)
    for s in spans:
        assert s.parent_span_id is None or (s.trace_id, s.parent_span_id) in by_id


def test_each_trace_has_one_root_a_gateway_server_span(spans):
    roots = defaultdict(list)
    for s in spans:
        roots[s.trace_id].append(s.parent_span_id is None)
    assert len(roots) > 80
    for trace_id, is_root in roots.items():
        assert sum(is_root) == 1, trace_id
    for s in spans:
        if s.parent_span_id is None:
            assert (s.service_name, s.kind) == ("gateway", SERVER)


def test_children_lie_within_their_parent(spans, by_id):
    for s in spans:
        assert s.start <= s.end
        if s.parent_span_id:
            parent = by_id[(s.trace_id, s.parent_span_id)]
            assert parent.start <= s.start and s.end <= parent.end


def test_every_service_runs_on_several_named_instances(spans):
    instances = defaultdict(set)
    for s in spans:
        assert re.fullmatch(rf"{re.escape(s.service_name)}-\d", s.service_instance_id)
        instances[s.service_name].add(s.service_instance_id)
    assert set(instances) == {"gateway", "orchestrator", "llm-inference", "retrieval", "tool-runner"}
    assert all(2 <= len(ids) <= 3 for ids in instances.values())


def test_calls_to_traced_services_have_one_server_child_in_the_callee(messages, spans, children):
    attributes = _attributes(messages)
    traced_calls = [s for s in spans if s.kind == CLIENT and "peer.service" not in attributes[s.span_id]]
    assert traced_calls
    for client in traced_calls:
        [server] = children[(client.trace_id, client.span_id)]
        assert server.kind == SERVER and server.service_name != client.service_name
        assert attributes[client.span_id]["server.address"] == server.service_name
        assert client.end - client.start > server.end - server.start


def test_external_calls_are_client_spans_without_a_server(messages, spans, children):
    attributes = _attributes(messages)
    peers = defaultdict(set)
    for s in spans:
        peer = attributes[s.span_id].get("peer.service")
        if peer:
            assert s.kind == CLIENT and attributes[s.span_id]["server.address"]
            assert not children[(s.trace_id, s.span_id)]
            peers[peer].add(s.service_name)
    assert peers == {"vector-db": {"retrieval"}, "search-api": {"tool-runner"}, "llm-api": {"tool-runner"}}
    assert all(
        attributes[s.span_id]["db.system"] == "qdrant"
        for s in spans if attributes[s.span_id].get("peer.service") == "vector-db"
    )


def test_llm_inference_stages_and_decode_time_follows_output_tokens(messages, spans, children):
    attributes = _attributes(messages)
    decodes = []
    for server in (s for s in spans if s.service_name == "llm-inference" and s.kind == SERVER):
        stages = {c.name: c for c in children[(server.trace_id, server.span_id)]}
        assert set(stages) == {"tokenize", "kv-cache-load", "decode"}
        assert all(c.kind == INTERNAL for c in stages.values())
        tokens = attributes[server.span_id]["gen_ai.usage.output_tokens"]
        assert attributes[stages["decode"].span_id]["gen_ai.usage.output_tokens"] == tokens
        decodes.append((tokens, stages["decode"].end - stages["decode"].start))
    decodes.sort()
    half = len(decodes) // 2
    assert statistics.mean(d for _, d in decodes[half:]) > 2 * statistics.mean(d for _, d in decodes[:half])


def test_messages_hold_at_most_max_spans_and_one_resource_per_resource_spans():
    generator = TraceGenerator(seed=5)
    spans = [span for trace in generator.traces(20) for span in trace]
    messages = to_export_requests(spans, max_spans_per_message=7)
    assert sorted(s.span_id for s in _spans(messages)) == sorted(s.span_id for s in spans)
    resource_of = {s.span_id: (s.service, s.instance) for s in spans}
    for message in messages:
        assert sum(len(ss["spans"]) for rs in message["resourceSpans"] for ss in rs["scopeSpans"]) <= 7
        resources = [
            tuple(_value(a["value"]) for a in rs["resource"]["attributes"]) for rs in message["resourceSpans"]
        ]
        assert len(resources) == len(set(resources))
        for resource, rs in zip(resources, message["resourceSpans"]):
            assert all(resource_of[s["spanId"]] == resource for ss in rs["scopeSpans"] for s in ss["spans"])


def test_json_round_trips_with_int64_as_strings(messages):
    for message in messages:
        assert json.loads(encode_json(message)) == message
    span = messages[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert isinstance(span["startTimeUnixNano"], str) and isinstance(span["endTimeUnixNano"], str)


def test_arrivals_follow_the_rate_and_the_clock_carries_on():
    generator = TraceGenerator(seed=9)

    def root_starts_s():
        traces = generator.generate(rate_per_s=10, duration_s=20)
        return [_elapsed_s(next(s for s in trace if not s.parent_span_id).start_unix_nano) for trace in traces]

    for starts, (low, high) in ((root_starts_s(), (0, 20)), (root_starts_s(), (20, 40))):
        assert 150 < len(starts) < 250
        assert starts == sorted(starts) and low <= starts[0] and starts[-1] < high


def test_fault_window_slows_one_instance_inside_the_window_only():
    fault = FaultWindow(
        service="llm-inference", instance="llm-inference-0", start_s=20, end_s=40, latency_factor=10
    )
    spans = _spans(_messages(TraceGenerator(seed=4, faults=[fault]), rate_per_s=3, duration_s=60))
    # Faults are scheduled on the trace's start, which is its root's start.
    trace_start_s = {s.trace_id: _elapsed_s(s.start) for s in spans if s.parent_span_id is None}
    durations = defaultdict(list)
    for s in spans:
        # Instance 2 is slow by capacity; compare with the peer of the same capacity.
        if s.kind == SERVER and s.service_instance_id in ("llm-inference-0", "llm-inference-1"):
            inside = 20 <= trace_start_s[s.trace_id] < 40
            durations[(inside, s.service_instance_id)].append(s.end - s.start)
    mean = {key: statistics.mean(values) for key, values in durations.items()}
    assert mean[(True, "llm-inference-0")] > 4 * mean[(True, "llm-inference-1")]
    assert mean[(False, "llm-inference-0")] < 2 * mean[(False, "llm-inference-1")]


def test_background_error_rate_is_roughly_as_configured():
    params = Params(error_rate=0.05, propagation=0.0)
    spans = _spans(_messages(TraceGenerator(seed=6, params=params), rate_per_s=10, duration_s=60))
    servers = [s for s in spans if s.kind == SERVER]
    assert len(servers) > 2000
    assert 0.03 < sum(s.error for s in servers) / len(servers) < 0.07


def test_callee_errors_propagate_to_the_callers_or_are_caught():
    always_failing = FaultWindow(service="llm-inference", start_s=0, end_s=1e9, error_rate=1.0)

    def spans_with(propagation):
        params = Params(error_rate=0.0, propagation=propagation)
        generator = TraceGenerator(seed=8, faults=[always_failing], params=params)
        messages = _messages(generator, rate_per_s=5, duration_s=10)
        return _spans(messages), messages

    propagated, messages = spans_with(1.0)
    roots = [s for s in propagated if s.parent_span_id is None]
    assert roots and all(s.error for s in roots)
    [message] = {
        s["status"]["message"]
        for m in messages for rs in m["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
        if "parentSpanId" not in s
    }
    assert message == "orchestrator: llm-inference: CUDA out of memory"

    caught, _ = spans_with(0.0)
    llm_calls = [s for s in caught if s.kind == CLIENT and s.name == "inference.Generator/Generate"]
    assert llm_calls and all(s.error for s in llm_calls)
    assert not any(s.error for s in caught if s.service_name in ("gateway", "orchestrator") and s.kind == SERVER)


def test_topology_rejects_cycles_and_unknown_targets():
    def service(name, *targets):
        steps = tuple(Call(target) for target in targets)
        return Service(name, "POST /x", "http", base_ms=1.0, instances=(Instance(),), steps=steps)

    with pytest.raises(ValueError, match="cycle"):
        Topology(root="a", services=(service("a", "b"), service("b", "a")))
    with pytest.raises(ValueError, match="unknown"):
        Topology(root="a", services=(service("a", "nowhere"),))


def test_callers_retry_failed_calls_as_real_extra_calls():
    from stormwatch.traffic.faults import FaultWindow, Params
    from stormwatch.traffic.generator import TraceGenerator

    fault = [FaultWindow(service="llm-inference", start_s=0, end_s=1e9, error_rate=1.0)]
    storm = TraceGenerator(seed=3, faults=fault, params=Params(retries={"orchestrator": 2})).traces(50)
    per_trace = [sum(1 for s in t if s.service == "llm-inference" and s.kind == 2) for t in storm]
    # Every failing call is tried twice more: three calls into the failing service per request.
    assert set(per_trace) - {0} == {3}
    resends = sorted(dict(s.attributes).get("http.request.resend_count", 0) for t in storm for s in t
                     if s.service == "orchestrator" and s.kind == 3 and s.name == "inference.Generator/Generate")
    assert set(resends) == {0, 1, 2} and resends.count(0) == resends.count(2)
