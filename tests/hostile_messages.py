"""Hostile OTLP JSON messages for flatten_spans, each knowing what must become of it: the dead-letter
reasons its message must get (one dead letter each) and the spans it must still give as rows.

Two sources: hypothesis draws junk of every JSON type, broken ids and times, scalars where OTLP has
objects or arrays, and odd but valid content
(huge attribute values, unicode, self-parents, duplicates, times far in the past or future); and real
TrainTicket messages are mutated (truncated, an id or time broken, a span duplicated or skewed).
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from reference.otlp import spans_of_request

TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")
SPAN_ID = re.compile(r"^[0-9a-fA-F]{16}$")
# What flatten_spans says of each broken field (sql/tables/otlp_spans.sql, the `otlp` format), as reason prefixes.
ID_REASON = {"traceId": "traceId", "spanId": "spanId", "parentSpanId": "parentSpanId is neither empty nor 16 hex"}
TIME_REASON = "startTimeUnixNano or endTimeUnixNano missing, zero or not an integer"
NOT_JSON = "not a JSON object"
NO_ARRAY = "no resourceSpans array"
FUTURE = "endTimeUnixNano is more than"
SHAPE = "not an OTLP ExportTraceServiceRequest: "


@dataclass
class Case:
    payload: bytes
    reasons: list[str] = field(default_factory=list)
    rows: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id), lower case


def request(spans: list[dict], service: str = "hostile") -> dict:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def _row(span: dict) -> tuple[str, str]:
    return span["traceId"].lower(), span["spanId"].lower()


# -- hypothesis ---------------------------------------------------------------------------------

def _hex(n: int) -> st.SearchStrategy[str]:
    return st.text("0123456789abcdefABCDEF", min_size=n, max_size=n).filter(lambda s: s.strip("0") != "")


# Any time from 1970 to now; later than the clock allows is a broken time (FUTURE).
NOW_NS = time.time_ns()
_times = st.integers(1, NOW_NS).flatmap(lambda start: st.tuples(st.just(start), st.integers(start, NOW_NS)))
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@st.composite
def valid_span(draw) -> dict:
    start, end = draw(_times)
    span = {"traceId": draw(_hex(32)), "spanId": draw(_hex(16)), "name": draw(_text), "kind": draw(st.integers(0, 5)),
            # OTLP JSON writes 64-bit integers as strings; a number is accepted too.
            "startTimeUnixNano": draw(st.sampled_from([str, int]))(start),
            "endTimeUnixNano": draw(st.sampled_from([str, int]))(end)}
    if draw(st.booleans()):
        span["parentSpanId"] = draw(st.one_of(_hex(16), st.just(""), st.just(span["spanId"])))  # self-parent too
    if draw(st.booleans()):
        # Up to 100 kB: six such spans stay under Kafka's default 1 MB message limit.
        value = draw(st.one_of(_text, st.integers(1000, 100_000).map(lambda n: "x" * n)))
        span["attributes"] = [{"key": draw(_text), "value": {"stringValue": value}}]
    if draw(st.booleans()):
        span["status"] = {"code": draw(st.integers(0, 2)), "message": draw(_text)}
    return span


def _bad_id(name: str) -> st.SearchStrategy:
    pattern = TRACE_ID if name == "traceId" else SPAN_ID
    wrong_text = st.one_of(st.text("0123456789abcdef", max_size=40), _text).filter(lambda s: not pattern.match(s))
    # A number is read as its digits: not one that happens to be a valid id.
    numbers = st.integers().filter(lambda i: not pattern.match(str(i)))
    if name == "parentSpanId":  # empty or absent is a root, not an error
        return st.one_of(wrong_text.filter(bool), numbers)
    zeros = st.just("0" * (32 if name == "traceId" else 16))
    return st.one_of(wrong_text, zeros, numbers, st.booleans(), st.none())


_bad_time = st.one_of(st.just("0"), st.just(0), st.just("9" * 25), st.text("abcxyz ", min_size=1, max_size=8), st.none())


@st.composite
def span_case(draw) -> Case:
    """A request of valid spans, one of which may be broken."""
    spans = draw(st.lists(valid_span(), min_size=1, max_size=5))
    if draw(st.booleans()):
        spans.append(dict(spans[0]))  # a duplicate: flatten_spans passes both, topology dedups
    broken, reasons = draw(st.integers(-1, len(spans) - 1)), []
    if broken >= 0:
        span = dict(spans[broken])
        what = draw(st.sampled_from(["traceId", "spanId", "parentSpanId", "time", "order", "future"]))
        if what == "future":  # a day to 150 years ahead
            span["endTimeUnixNano"] = str(NOW_NS + draw(st.integers(86400 * 10**9, 7 * 10**18 - NOW_NS)))
            reasons = [FUTURE]
        elif what == "time":
            span[draw(st.sampled_from(["startTimeUnixNano", "endTimeUnixNano"]))] = draw(_bad_time)
            reasons = [TIME_REASON]
        elif what == "order":
            start = int(span["startTimeUnixNano"])
            span["endTimeUnixNano"] = str(end := start - draw(st.integers(1, start)))
            reasons = ["endTimeUnixNano is before startTimeUnixNano" if end else TIME_REASON]
        else:
            span[what] = draw(_bad_id(what))
            reasons = [ID_REASON[what]]
        spans[broken] = {k: v for k, v in span.items() if v is not None}
    rows = [_row(s) for i, s in enumerate(spans) if i != broken]
    return Case(json.dumps(request(spans, draw(_text) or "hostile")).encode(), reasons, rows)


_scalar = st.one_of(st.integers(), st.booleans(), _text, st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def shape_case(draw) -> Case:
    """A request of valid spans with a scalar where OTLP has an object or an array: the message is dead
    lettered saying where, and its valid spans still come out."""
    spans = draw(st.lists(valid_span(), min_size=1, max_size=3))
    message = request(spans)
    resource_spans = message["resourceSpans"]
    junk = draw(_scalar)
    where = draw(st.sampled_from(["resourceSpans[]", "scopeSpans[]", "spans[]", "scopeSpans", "spans", "resource",
                                  "attributes", "status"]))
    if where == "resourceSpans[]":
        resource_spans.append(junk)
    elif where == "scopeSpans[]":
        resource_spans[0]["scopeSpans"].append(junk)
    elif where == "spans[]":
        spans.append(junk)
    elif where == "scopeSpans":
        resource_spans.append({"scopeSpans": junk})
    elif where == "spans":
        resource_spans.append({"scopeSpans": [{"spans": junk}]})
    elif where == "resource":
        resource_spans[0]["resource"] = junk
    else:
        spans[0] = {**spans[0], where: junk}
    return Case(json.dumps(message).encode(), [SHAPE], [_row(s) for s in spans if isinstance(s, dict)])


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12)

message_case = st.one_of(
    # Not JSON: text that no JSON value starts with, bytes that are not UTF-8, nothing at all.
    st.builds(lambda s: Case(("x" + s).encode(), [NOT_JSON]), _text),
    st.builds(lambda b: Case(b"\xff" + b, [NOT_JSON]), st.binary(max_size=40)),
    st.just(Case(b"", ["empty message"])),
    # JSON, but not an object.
    st.builds(lambda v: Case(json.dumps(v).encode(), [NOT_JSON]),
              _json.filter(lambda v: not isinstance(v, dict))),
    # An object, but no array of resourceSpans.
    st.builds(lambda d: Case(json.dumps(d).encode(), [NO_ARRAY]),
              st.dictionaries(_text.filter(lambda k: k != "resourceSpans"), _json, max_size=4)),
    st.builds(lambda v: Case(json.dumps({"resourceSpans": v}).encode(), [NO_ARRAY]),
              _json.filter(lambda v: not isinstance(v, list))),
)


def drawn(count: int) -> list[Case]:
    """`count` cases from hypothesis, the same ones every run (derandomized): a failure reproduces."""
    cases: list[Case] = []

    @settings(max_examples=count, database=None, derandomize=True, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.one_of(span_case(), shape_case(), message_case))
    def collect(case: Case) -> None:
        cases.append(case)

    collect()
    return cases


# -- mutations of real messages -----------------------------------------------------------------

def mutated(lines: list[bytes], count: int, seed: int = 0) -> list[Case]:
    """`count` real OTLP JSON messages, each broken (or made odd) one way."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        line = rng.choice(lines)
        message = json.loads(line)
        spans = [s for rs in message["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
        rows = [(s.trace_id, s.span_id) for s in spans_of_request(message)]
        span, index = (lambda i: (spans[i], i))(rng.randrange(len(spans)))
        how = rng.choice(["truncate", "trace_id", "span_id", "parent", "drop_time", "order", "skew", "future",
                          "self_parent", "cycle", "duplicate"])
        reasons: list[str] = []
        if how == "truncate":
            cases.append(Case(line[:rng.randrange(1, len(line) - 1)], [NOT_JSON]))
            continue
        if how in ("trace_id", "span_id", "parent"):
            name = {"trace_id": "traceId", "span_id": "spanId", "parent": "parentSpanId"}[how]
            length = rng.choice([0, 1, 8, 15, 17, 31, 33, 64]) if how != "parent" else rng.choice([1, 8, 15, 17, 32])
            span[name] = "".join(rng.choice("0123456789abcdef") for _ in range(length))
            reasons, rows = [ID_REASON[name]], rows[:index] + rows[index + 1:]
        elif how == "drop_time":
            del span[rng.choice(["startTimeUnixNano", "endTimeUnixNano"])]
            reasons, rows = [TIME_REASON], rows[:index] + rows[index + 1:]
        elif how == "order":
            span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1)
            reasons, rows = ["endTimeUnixNano is before startTimeUnixNano"], rows[:index] + rows[index + 1:]
        elif how == "skew":  # the child's clock a minute behind its parent's: valid, topology's concern
            shift = 60 * 10**9
            span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - shift)
            span["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) - shift)
        elif how == "future":  # ten years ahead is refused; ten years back is merely late for topology
            shift = rng.choice([-1, 1]) * 10 * 365 * 86400 * 10**9
            span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + shift)
            span["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) + shift)
            if shift > 0:
                reasons, rows = [FUTURE], rows[:index] + rows[index + 1:]
        elif how == "self_parent":
            span["parentSpanId"] = span["spanId"]
        elif how == "cycle":  # the span and another of its trace, each the other's parent
            other = rng.choice([s for s in spans if s["traceId"] == span["traceId"]])
            span["parentSpanId"], other["parentSpanId"] = other["spanId"], span["spanId"]
        else:
            message["resourceSpans"][0]["scopeSpans"][0]["spans"].append(dict(span))
            rows = rows + [_row(span)]
        cases.append(Case(json.dumps(message).encode(), reasons, rows))
    return cases


def big_trace(depth: int, width: int, per_message: int = 2000) -> list[Case]:
    """One trace of a chain `depth` deep (each span the parent of the next) whose root also has `width`
    children, in messages of `per_message` spans."""
    trace, start, end = "d" * 31 + "1", 1_700_000_000 * 10**9, 1_700_000_100 * 10**9

    def span(i: int, parent: int | None) -> dict:
        return {"traceId": trace, "spanId": f"{i + 1:016x}", "parentSpanId": f"{parent + 1:016x}" if parent is not None
                else "", "name": f"span-{i}", "kind": 1, "startTimeUnixNano": str(start + i), "endTimeUnixNano": str(end - i)}

    spans = [span(i, i - 1 if i else None) for i in range(depth)] + [span(depth + i, 0) for i in range(width)]
    return [Case(json.dumps(request(spans[i:i + per_message], "big")).encode(), [],
                 [_row(s) for s in spans[i:i + per_message]]) for i in range(0, len(spans), per_message)]


def broken_protobuf(messages: list[bytes], count: int, seed: int = 0) -> list[Case]:
    """Real OTLP protobuf messages truncated or with bytes overwritten, kept only where the protobuf
    parser (Python's here, Java's in the job) refuses them: the dead letters must say so."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    rng, cases = random.Random(seed), []
    while len(cases) < count:
        message = bytearray(rng.choice(messages))
        if rng.random() < 0.5:
            message = message[:rng.randrange(1, len(message))]
        else:
            for _ in range(rng.randint(1, 8)):
                message[rng.randrange(len(message))] = rng.randrange(256)
        try:
            ExportTraceServiceRequest.FromString(bytes(message))
        except DecodeError:
            cases.append(Case(bytes(message), ["not an OTLP ExportTraceServiceRequest in protobuf"]))
    return cases
