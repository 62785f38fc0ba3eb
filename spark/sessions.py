"""``elanus.spark.session()``: a SparkSession set up for Elanus in one call.

Workers must run the interpreter that has Elanus installed (``PYSPARK_PYTHON``), Arrow
carries the data between the JVM and Python, filter pushdown to Python data sources is
on (Spark refuses a reader that implements ``pushFilters`` otherwise), and the ``elanus``
format is registered. Local runs get small shuffles, no UI and a throwaway warehouse dir.
(This module is not called ``session``: a submodule of that name would hide the function
``elanus.spark.session``.)
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SQL_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
}


def session(master: str = "local[2]", app_name: str = "elanus", **conf: Any) -> SparkSession:
    """Get (or create) a SparkSession with the ``elanus`` data source registered.

    ``conf`` adds or overrides Spark settings; pass dotted keys as a dict:
    ``session(**{"spark.sql.shuffle.partitions": "8"})``.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from elanus.spark.source import ElanusDataSource

    settings: dict[str, str] = {
        **SQL_DEFAULTS,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if master.startswith("local"):
        warehouse = tempfile.mkdtemp(prefix="elanus-spark-warehouse-")
        atexit.register(shutil.rmtree, warehouse, True)
        settings.update(
            {
                "spark.sql.warehouse.dir": warehouse,
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    settings.update({k: str(v) for k, v in conf.items()})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key in SQL_DEFAULTS:  # an existing session keeps its old settings otherwise
        spark.conf.set(key, settings[key])
    spark.dataSource.register(ElanusDataSource)
    return spark


def shutdown(spark: SparkSession, timeout: float = 30.0) -> None:
    """Stop ``spark`` and the JVM PySpark started for it. ``SparkSession.stop`` leaves the
    JVM running until the interpreter exits (for the next session); long-lived processes
    such as test suites end it here. A later ``session()`` starts a new JVM."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except Exception:  # noqa: BLE001 - still running: make sure it goes
                proc.kill()
                proc.wait(timeout)
