"""Spark index runs (DESIGN.md, index service): the pending build tasks of a collection
run as one Spark job, one Spark task per segment. Each executor reads its segment from
Lance, writes the index files itself and reports the result through the proxy, so results
go through the coord's state machine exactly like an index node's.

The driver claims the tasks under a lease (``claim_index_tasks``) and renews it while the
job runs; if the driver dies, the lease lapses and the coord issues the tasks again with
a higher version, so anything the lost run still reports is ignored.

Runs from the CLI (``elanus index build COLLECTION --spark-master local[2]``) or through
``spark-submit`` (``python -m elanus.spark.index_run`` is the entry point's module)."""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elanus.client.client import Client

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from elanus.ops.replies import BuildTask


@dataclass
class IndexRun:
    """What a run did: tasks claimed, built, failed, and results the coord turned down."""

    node_id: str
    claimed: int = 0
    built: int = 0
    failed: int = 0
    rejected: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def build_and_report(
    uri: str, node_id: str, task: BuildTask, connect: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One Spark task: build one segment's index and report it (runs on an executor)."""
    from elanus.index.buildtask import run_build_task

    report = run_build_task(
        build_id=task["build_id"],
        version=task["version"],
        field=task["field"],
        spec=task["spec"],
        data_path=task["data_path"],
        out_dir=task["out_dir"],
    )
    with Client(uri, **(connect or {})) as client:
        reply = client.report_index_task(node_id, report)
    return {**report, "accepted": bool(reply.get("accepted"))}


class _Lease:
    """Renews the run's lease on a thread until closed; learns how many of the run's
    tasks the coord still counts as in progress (the rest were reported)."""

    def __init__(
        self, uri: str, node_id: str, lease_s: float, claimed: int, connect: Mapping[str, Any]
    ) -> None:
        self.remaining = claimed
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._renew,
            args=(Client(uri, **connect), node_id, max(0.2, lease_s / 3)),
            daemon=True,
        )
        self._thread.start()

    def _renew(self, client: Client, node_id: str, every: float) -> None:
        with client:
            while not self._stop.wait(every):
                try:
                    reply = client.index_heartbeat(node_id)
                    self.remaining = len(reply["tasks"])
                except Exception:  # noqa: BLE001 - try again; the lease covers a few misses
                    continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def run_index_build(
    uri: str,
    collection: str,
    *,
    spark: SparkSession | None = None,
    master: str = "local[2]",
    db: str | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> IndexRun:
    """Claim the collection's pending index tasks and build them as one Spark job.
    ``client_options`` are ``Client`` keyword arguments for the driver and the executors
    (``tls_root_certs`` as bytes: executors may not see the driver's files)."""
    started = time.perf_counter()
    run = IndexRun(node_id=f"spark_{uuid.uuid4().hex[:10]}")
    connect = dict(client_options or {})
    with Client(uri, db=db or "default", **connect) as client:
        claim = client.claim_index_tasks(run.node_id, collection, retry_failed=retry_failed)
    tasks: list[BuildTask] = claim["tasks"]
    run.claimed = len(tasks)
    if not tasks:
        return run
    lease = _Lease(uri, run.node_id, float(claim["lease_s"]), len(tasks), connect)
    try:
        if spark is None:
            from elanus.spark import session

            spark = session(master, app_name=f"elanus-index-{collection}")
        node_id = run.node_id
        rdd = spark.sparkContext.parallelize(tasks, numSlices=len(tasks))
        job = rdd.map(lambda t: build_and_report(uri, node_id, t, connect))
        outcome: dict[str, Any] = {}

        def collect() -> None:
            try:
                outcome["results"] = job.collect()
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                outcome["error"] = exc

        worker = threading.Thread(target=collect, daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.25)
            if on_progress is not None:
                on_progress(run.claimed - lease.remaining, run.claimed)
        if "error" in outcome:
            raise outcome["error"]
        for result in outcome["results"]:
            if not result["accepted"]:
                run.rejected += 1
            elif result["ok"]:
                run.built += 1
            else:
                run.failed += 1
                run.failures.append(
                    {"build_id": result["build_id"], "reason": result.get("fail_reason")}
                )
        if on_progress is not None:
            on_progress(run.claimed, run.claimed)
    finally:
        lease.close()
    run.seconds = round(time.perf_counter() - started, 3)
    return run


def main(argv: list[str] | None = None) -> None:
    """``spark-submit .../index_run.py --uri grpc://host:8815 COLLECTION``."""
    parser = argparse.ArgumentParser(description="Run an Elanus collection's index tasks.")
    parser.add_argument("collection")
    parser.add_argument("--uri", default="grpc://127.0.0.1:8815")
    parser.add_argument("--db", default=None)
    parser.add_argument("--retry-failed", action="store_true")
    parser.add_argument("--tls-ca", default=None, help="PEM file of the proxy's TLS CA")
    args = parser.parse_args(argv)
    token = os.environ.get("ELANUS_TOKEN")  # "user:password"; never on a command line
    from pyspark.sql import SparkSession

    from elanus.wire.tls import read_pem

    connect: dict[str, Any] = (
        {"tls_root_certs": read_pem(args.tls_ca, "--tls-ca")} if args.tls_ca else {}
    )
    if token:
        connect["token"] = token

    spark = SparkSession.builder.appName(f"elanus-index-{args.collection}").getOrCreate()
    try:
        run = run_index_build(
            args.uri,
            args.collection,
            spark=spark,
            db=args.db,
            retry_failed=args.retry_failed,
            client_options=connect,
        )
    finally:
        spark.stop()
    print(run.to_dict())


if __name__ == "__main__":
    main()
