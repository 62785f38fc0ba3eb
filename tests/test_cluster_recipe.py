"""The README's cluster recipe for separate machines, followed as written: one shared
``elanus.toml`` (NATS cluster URLs, ``stream_replicas = 3``, ``storage = "s3://..."``,
auth on, the NATS user), one ``elanus run ROLE`` per role, each started from a directory
of its own (a "machine": its ``./elanus-data`` is its own), the secrets in the
environment. Real parts: three clustered nats-servers, a moto S3 server, five role
processes. The roles share only NATS and the bucket, so a load, an index build or a
search that read another role's local directory would fail here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from conftest import ElanusProcess, run_elanus, wait_healthy
from s3 import MotoServer

from elanus.channels.nats_cluster import NatsCluster
from elanus.channels.nats_server import free_port
from elanus.client import Client

ROLES = ("coord", "datanode", "querynode", "indexnode", "proxy")
ROOT_PASSWORD = "recipe-root-Pw1"


def toml_value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def test_the_readme_recipe_for_separate_machines_runs_as_written(
    tmp_path: Path, moto_server: MotoServer, elanus_processes: Any
) -> None:
    with NatsCluster(tmp_path / "nats", 3) as nats:
        s3 = moto_server.settings(moto_server.new_bucket(), "prod")
        settings = {
            "nats_url": nats.url,
            "stream_replicas": 3,
            **s3,
            "auth_enabled": True,
            "nats_user": nats.credentials.user,
        }
        config = tmp_path / "elanus.toml"
        config.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items()))
        env = {
            "ELANUS_CONFIG": str(config),
            "ELANUS_NATS_PASSWORD": nats.credentials.password,
            "ELANUS_ROOT_PASSWORD": ROOT_PASSWORD,
        }
        port = free_port()
        uri = f"grpc://127.0.0.1:{port}"
        machines: dict[str, Path] = {}
        for role in ROLES:
            machines[role] = tmp_path / f"machine-{role}"
            machines[role].mkdir()
            extra = ("--host", "127.0.0.1", "--port", str(port)) if role == "proxy" else ()
            elanus_processes(
                ElanusProcess(
                    "run",
                    role,
                    *extra,
                    log_path=tmp_path / f"{role}.log",
                    env=env,
                    cwd=machines[role],
                )
            ).start()
        wait_healthy(uri, timeout=90)

        with Client(uri, user="root", password=ROOT_PASSWORD, timeout=120) as client:
            # quick setup: the index is built by the index node, the load by the query node
            client.create_collection("recipe", dimension=8)
            vectors = np.random.default_rng(5).random((2000, 8), dtype=np.float32)
            client.insert("recipe", {"id": np.arange(2000), "vector": vectors})
            client.flush("recipe")
            (hits,) = client.search(
                "recipe", [vectors[7]], limit=3, consistency_level="Strong", output_fields=["id"]
            )
            assert hits.ids[0] == 7
            (count,) = client.query("recipe", output_fields=["count(*)"])
            assert count["count(*)"] == 2000
            flushed = [s for s in client.get_segment_info("recipe") if s["state"] == "Flushed"]
            assert flushed and all(s["path"].startswith("s3://") for s in flushed), flushed

        status = run_elanus(
            "status", "--json", "--uri", uri, "--user", "root", "--password", ROOT_PASSWORD
        )
        assert status.returncode == 0, status.stderr
        assert sorted(s["role"] for s in json.loads(status.stdout)) == sorted(ROLES)
        for role, machine in machines.items():  # each machine holds only its own state
            data = machine / "elanus-data"
            assert not (data / "storage").exists(), f"{role} wrote segments locally"
        elanus_processes.stop_all()  # while NATS is up: each role stops at once
