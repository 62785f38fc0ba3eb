"""A real S3-protocol server for the tests: moto's standalone server (``moto_server``) as a
process on a free loopback port, a bucket created in it, and the settings that reach it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from elanus.channels.nats_server import free_port

ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
MOTO_BIN = str(Path(sys.executable).parent / "moto_server")


@dataclass
class MotoServer:
    endpoint: str
    process: subprocess.Popen[bytes]

    def settings(self, bucket: str, prefix: str = "elanus") -> dict[str, Any]:
        """Settings overrides that put a role's storage under ``s3://bucket/prefix``."""
        return {
            "storage": f"s3://{bucket}/{prefix}",
            "s3_endpoint": self.endpoint,
            "s3_region": "us-east-1",
            "s3_access_key_id": ACCESS_KEY,
            "s3_secret_access_key": SECRET_KEY,
            "s3_allow_http": True,
        }

    def new_bucket(self) -> str:
        name = f"elanus-{uuid.uuid4().hex[:12]}"
        fs = pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region="us-east-1",
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            allow_bucket_creation=True,
        )
        fs.create_dir(name)
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_moto(log: Path, *, check_credentials: bool = False) -> MotoServer:
    """``check_credentials``: moto then refuses keys it does not know (its IAM mode)."""
    port = free_port()
    out = log.open("wb")
    env = {**os.environ, **({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if check_credentials else {})}
    proc = subprocess.Popen(
        [MOTO_BIN, "-H", "127.0.0.1", "-p", str(port)],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    fs = pafs.S3FileSystem(
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        region="us-east-1",
        connect_timeout=1,
    )
    while True:
        try:
            fs.get_file_info(pafs.FileSelector("", recursive=False))
            return MotoServer(endpoint, proc)
        except OSError as exc:
            if check_credentials and "ACCESS" in str(exc).upper():
                return MotoServer(endpoint, proc)  # up, and refusing unknown keys
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                tail = log.read_text()[-2000:]
                raise RuntimeError(f"moto_server did not start: {tail}") from None
            time.sleep(0.2)
