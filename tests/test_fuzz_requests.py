"""The malformed-request suite (issue 13): hostile and careless calls through a bare
``pyarrow.flight.FlightClient`` (no SDK) against one real ``elanus standalone`` process.

For every case: the server process is alive and ``health`` still answers; a refusal is a
Flight error whose message starts with a known ``[CODE]`` (never INTERNAL: that is a bug in
whichever check let the input through) and leaks no traceback, file path or source text;
where a write was refused, the collection's row count (``count(*)``, Strong) is unchanged.
The cases themselves are in ``fuzz_cases.py``; ``pytest --collect-only -q`` counts them.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fuzz_cases
import fuzz_streams
import grpc
import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import StandaloneProcess
from fuzz_cases import BIG, LEAK, MAIN, SETTINGS, VEC, Case, dumps, fuzz_schema, seed_collections
from fuzz_streams import DROP, VEC_TYPE, good_batch

from elanus.client.client import Client
from elanus.errors import ErrorCode

pytestmark = pytest.mark.fuzz

CALL_TIMEOUT_S = 20.0
OPTIONS = flight.FlightCallOptions(timeout=CALL_TIMEOUT_S)
KNOWN_CODES = set(ErrorCode.__members__) - {"INTERNAL"}
_CODE = re.compile(r"^(?:[A-Za-z ]{1,40}: )?\[([A-Z_]+)\] ")
RAW_DOPUT = "/arrow.flight.protocol.FlightService/DoPut"
UNCODED_OK = {"raw-put/garbage-schema", "raw-put/batch-before-schema"}
"""Refused by Arrow's C++ Flight layer while it reads the stream's first message, before
any Elanus code runs: their status carries Arrow's text, which no server code can prefix."""


@dataclass
class Env:
    server: StandaloneProcess
    fc: flight.FlightClient
    raw_put: Callable[..., Any]
    ticket: dict[str, Any]
    """A real read ticket (a sealed segment of MAIN), for the tampered-ticket cases."""

    def action(self, name: str, body: dict[str, Any]) -> Any:
        (result,) = self.fc.do_action(flight.Action(name, dumps(body)), OPTIONS)
        return json.loads(result.body.to_pybytes())

    def count(self, collection: str) -> int:
        body = {"collection": collection, "output_fields": ["count(*)"]}
        rows = self.action("query", {**body, "consistency_level": "Strong"})["rows"]
        return int(rows[0]["count(*)"])

    def assert_alive(self) -> None:
        self.server.check_alive()
        status = self.action("health", {})
        assert status["status"] == "ok", status


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    data = tmp_path_factory.mktemp("fuzz") / "data"
    server = StandaloneProcess(data)
    server.env = {f"ELANUS_{k.upper()}": str(v) for k, v in SETTINGS.items()}
    channel = None
    try:
        server.start().wait_ready()
        client = Client(server.uri, timeout=CALL_TIMEOUT_S)
        seed_collections(client, MAIN, BIG)
        for group in ("fz_group", "fz_group_to_drop"):  # what the base bodies act on
            client.create_privilege_group(group)
        client.close()
        fc = flight.FlightClient(server.uri)
        info = fc.get_flight_info(flight.FlightDescriptor.for_command(dumps({"collection": MAIN})))
        ticket = json.loads(info.endpoints[0].ticket.ticket)
        channel = grpc.insecure_channel(server.uri.removeprefix("grpc://"))
        raw_put = channel.stream_stream(RAW_DOPUT)
        yield Env(server, fc, raw_put, ticket)
    finally:
        shutil.rmtree(fuzz_cases.BACKUPS, ignore_errors=True)
        if channel is not None:
            channel.close()
        server.stop()


# -- the calls -------------------------------------------------------------------------------
class RawError(Exception):
    """A gRPC status from the raw DoPut client, shaped like a Flight error's text."""


def _descriptor(case: Case) -> flight.FlightDescriptor:
    if case.path is not None:
        return flight.FlightDescriptor.for_path(*case.path)
    return flight.FlightDescriptor.for_command(case.payload)


def _first_coded(errors: list[BaseException]) -> BaseException:
    """A failed stream reports the server's status on close, and a client-side symptom
    ("stream closed") on the write that noticed: prefer the one with a code."""
    coded = [e for e in errors if _CODE.match(str(e))]
    return (coded or errors)[0]


def _drain(writer: Any, body: Callable[[], None]) -> None:
    errors: list[BaseException] = []
    try:
        body()
    except (flight.FlightError, pa.ArrowException, OSError) as exc:
        errors.append(exc)
    try:
        writer.close()
    except (flight.FlightError, pa.ArrowException, OSError) as exc:
        errors.append(exc)
    if errors:
        raise _first_coded(errors)


def call_action(env: Env, case: Case) -> None:
    list(env.fc.do_action(flight.Action(case.action, case.payload), OPTIONS))


def call_get(env: Env, case: Case) -> None:
    ticket = case.payload
    if case.id.startswith("get/ticket/"):
        doc = {**env.ticket, **json.loads(case.payload)}
        if doc.get("ts") == "future":
            doc["ts"] = env.ticket["ts"] + (3_600_000 << 18)  # an hour past the plan
        ticket = dumps({k: v for k, v in doc.items() if v != DROP})
    env.fc.do_get(flight.Ticket(ticket), OPTIONS).read_all()


def call_info(env: Env, case: Case) -> None:
    env.fc.get_flight_info(_descriptor(case), OPTIONS)


def call_schema(env: Env, case: Case) -> None:
    env.fc.get_schema(_descriptor(case), OPTIONS)


def call_put(env: Env, case: Case) -> None:
    assert case.batches is not None
    schema, batches = case.batches()
    writer, reader = env.fc.do_put(_descriptor(case), schema, OPTIONS)

    def body() -> None:
        for batch in batches:
            writer.write_batch(batch)
        writer.done_writing()
        while reader.read() is not None:
            pass

    _drain(writer, body)


def call_exchange(env: Env, case: Case) -> None:
    assert case.batches is not None
    schema, batches = case.batches()
    writer, reader = env.fc.do_exchange(_descriptor(case), OPTIONS)

    def body() -> None:
        writer.begin(schema)
        for batch in batches:
            writer.write_batch(batch)
        writer.done_writing()
        reader.read_all()

    _drain(writer, body)


def call_raw_put(env: Env, case: Case) -> None:
    try:
        for _ in env.raw_put(iter(case.frames), timeout=CALL_TIMEOUT_S):
            pass
    except grpc.RpcError as exc:
        raise RawError(exc.details() or str(exc.code())) from None


CALLS: dict[str, Callable[[Env, Case], None]] = {
    "action": call_action,
    "get": call_get,
    "info": call_info,
    "schema": call_schema,
    "put": call_put,
    "exchange": call_exchange,
    "raw_put": call_raw_put,
}


# -- the checks --------------------------------------------------------------------------
def check_refusal(case: Case, exc: BaseException) -> str:
    """The error of a refused call: a Flight error with a known, non-INTERNAL code and a
    message without leaks. Returns the code."""
    assert isinstance(exc, flight.FlightError | pa.ArrowException | RawError), (
        f"{case.id}: not a Flight error: {exc!r}"
    )
    text = str(exc)
    leak = LEAK.search(text)
    assert leak is None, f"{case.id}: the message leaks {leak.group(0)!r}: {text[:600]}"
    match = _CODE.match(text)
    if match is None and case.id in UNCODED_OK:
        return ""
    assert match is not None, f"{case.id}: no [CODE] in {text[:600]!r}"
    code = match.group(1)
    assert code != "INTERNAL", f"{case.id}: INTERNAL error (a bug): {text[:600]}"
    assert code in KNOWN_CODES, f"{case.id}: unknown code {code}: {text[:300]}"
    if case.codes:
        assert code in case.codes, f"{case.id}: expected {sorted(case.codes)}, got {text[:600]}"
    for word in case.words:
        assert word in text, f"{case.id}: {word!r} not in {text[:600]!r}"
    extra = getattr(exc, "extra_info", None)
    if extra:
        assert json.loads(extra)["code"] == code, f"{case.id}: extra_info says {extra!r}"
    return code


def run_case(env: Env, case: Case) -> str | None:
    """Run one case and check everything; returns the error code (None: accepted)."""
    before = env.count(case.writes) if case.writes else None
    code: str | None = None
    try:
        CALLS[case.call](env, case)
    except Exception as exc:  # noqa: BLE001 - every failure is checked below
        code = check_refusal(case, exc)
    else:
        assert case.ok, f"{case.id}: accepted, but it should have been refused"
    env.assert_alive()
    if case.writes and code is not None:
        assert env.count(case.writes) == before, f"{case.id}: refused, yet rows changed"
    return code


def all_cases() -> list[Case]:
    """Every case, each named once (the ids are the test ids)."""
    cases = [
        *fuzz_cases.base_body_cases(),
        *fuzz_cases.wrong_type_cases(),
        *fuzz_cases.bad_json_cases(),
        *fuzz_cases.huge_number_cases(),
        *fuzz_cases.name_cases(),
        *fuzz_cases.nesting_cases(),
        *fuzz_streams.put_cases(),
        *fuzz_streams.raw_put_cases(),
        *fuzz_streams.get_cases(),
        *fuzz_streams.plan_cases(),
        *fuzz_streams.exchange_cases(),
        *fuzz_streams.oversized_cases(),
    ]
    ids = Counter(c.id for c in cases)
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1]
    return cases


def _params() -> list[Any]:
    return [pytest.param(case, id=case.id) for case in all_cases()]


@pytest.mark.parametrize("case", _params())
def test_malformed_request(env: Env, case: Case) -> None:
    run_case(env, case)


# -- races with drop ---------------------------------------------------------------------
RACE = "fzrace"
RACE_ROUNDS = 3


def _race_insert(fc: flight.FlightClient, rng: np.random.Generator) -> None:
    batch = good_batch(3, int(rng.integers(0, 1 << 40)))
    descriptor = flight.FlightDescriptor.for_command(dumps({"collection": RACE}))
    writer, reader = fc.do_put(descriptor, batch.schema, OPTIONS)

    def body() -> None:
        writer.write_batch(batch)
        writer.done_writing()
        while reader.read() is not None:
            pass

    _drain(writer, body)


def _race_action(name: str, body: dict[str, Any]) -> Callable[..., None]:
    def call(fc: flight.FlightClient, rng: np.random.Generator) -> None:
        list(fc.do_action(flight.Action(name, dumps({"collection": RACE, **body})), OPTIONS))

    return call


def _race_get(fc: flight.FlightClient, rng: np.random.Generator) -> None:
    ticket = dumps({"collection": RACE, "filter": "id >= 0", "limit": 5})
    fc.do_get(flight.Ticket(ticket), OPTIONS).read_all()


def _race_exchange(fc: flight.FlightClient, rng: np.random.Generator) -> None:
    descriptor = flight.FlightDescriptor.for_command(dumps({"collection": RACE, "limit": 2}))
    writer, reader = fc.do_exchange(descriptor, OPTIONS)
    batch = pa.record_batch({"q": pa.array([VEC], VEC_TYPE)})

    def body() -> None:
        writer.begin(batch.schema)
        writer.write_batch(batch)
        writer.done_writing()
        reader.read_all()

    _drain(writer, body)


def _race_plan(fc: flight.FlightClient, rng: np.random.Generator) -> None:
    descriptor = flight.FlightDescriptor.for_command(dumps({"collection": RACE}))
    for endpoint in fc.get_flight_info(descriptor, OPTIONS).endpoints:
        fc.do_get(endpoint.ticket, OPTIONS).read_all()


RACE_CALLS: dict[str, Callable[[flight.FlightClient, np.random.Generator], None]] = {
    "insert": _race_insert,
    "search": _race_action("search", {"data": [VEC], "limit": 3}),
    "query": _race_action("query", {"output_fields": ["count(*)"]}),
    "delete": _race_action("delete", {"ids": [1, 2, 3]}),
    "get": _race_get,
    "exchange": _race_exchange,
    "plan": _race_plan,
    "flush": _race_action("flush", {}),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "ops",
    [
        ("insert", "insert", "query"),
        ("search", "exchange", "get"),
        ("insert", "delete", "plan"),
        ("insert", "search", "flush"),
    ],
    ids="+".join,
)
def test_race_with_drop(env: Env, ops: tuple[str, ...]) -> None:
    """Threads write and read a collection while it is dropped and created again: each
    call succeeds or is refused with a code; afterwards the server answers, and a new
    collection of that name holds only its own rows (none of the dropped ones')."""
    stop = threading.Event()
    codes: Counter[str] = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def worker(op: str, seed: int) -> None:
        fc = flight.FlightClient(env.server.uri)
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                try:
                    RACE_CALLS[op](fc, rng)
                    outcome = "ok"
                except Exception as exc:  # noqa: BLE001 - checked right here
                    case = Case(f"race/{op}", "race")
                    try:
                        outcome = check_refusal(case, exc)
                    except AssertionError as bad:
                        with lock:
                            failures.append(str(bad))
                        outcome = "bad"
                with lock:
                    codes[f"{op}:{outcome}"] += 1
        finally:
            fc.close()

    threads = [
        threading.Thread(target=worker, args=(op, i), daemon=True) for i, op in enumerate(ops)
    ]
    for t in threads:
        t.start()
    try:
        for _ in range(RACE_ROUNDS):
            env.action("create_collection", {"name": RACE, "schema": fuzz_schema().to_dict()})
            env.action("load_collection", {"collection": RACE})
            stop.wait(0.3)
            env.action("drop_collection", {"name": RACE})
            stop.wait(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a racing call hung"
    assert not failures, f"{len(failures)} bad refusals, first: {failures[0]}"
    refused = sum(n for key, n in codes.items() if not key.endswith(":ok"))
    assert refused and refused < sum(codes.values()), f"the calls did not meet the drop: {codes}"
    env.assert_alive()
    # a fresh collection of the same name sees none of the rows written to the dropped ones
    env.action("create_collection", {"name": RACE, "schema": fuzz_schema().to_dict()})
    try:
        env.action("load_collection", {"collection": RACE})
        batch = good_batch(5, 0)
        descriptor = flight.FlightDescriptor.for_command(dumps({"collection": RACE}))
        # After the churn the datanode may still be catching up: flow control may refuse
        # with RATE_LIMITED ("retry later"), which is what a client does, for a while.
        deadline = time.monotonic() + 30
        while True:
            writer, reader = env.fc.do_put(descriptor, batch.schema, OPTIONS)
            try:
                writer.write_batch(batch)
                writer.done_writing()
                writer.close()
                break
            except flight.FlightServerError as exc:
                if "[RATE_LIMITED]" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert env.count(RACE) == 5
    finally:
        env.action("drop_collection", {"name": RACE})


def test_the_main_collection_is_intact(env: Env) -> None:
    """After every case (this runs last in the module): the rows written at set-up are
    all there and read back unchanged."""
    rows = env.action(
        "query",
        {
            "collection": MAIN,
            "filter": "id < 80",
            "output_fields": ["title"],
            "limit": 100,
            "consistency_level": "Strong",
        },
    )["rows"]
    assert sorted(r["id"] for r in rows) == list(range(80))
    assert {r["title"] for r in rows} == {f"t{i}" for i in range(60)}


def test_case_count() -> None:
    """The issue asks for at least 300 cases."""
    assert len(all_cases()) >= 300
