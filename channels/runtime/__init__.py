"""The role runtime: what every Elanus process runs its roles on, beside the comm layer.

``role`` (the Role base class and its handler tables), ``supervisor`` (background tasks
whose failures are logged and acted on), ``sessions`` (liveness leases), ``loop`` (the one
bridge between threads and asyncio), ``ports``, ``metrics`` and ``hotmetrics``
(Prometheus), ``requestlog`` (a proxy's recent and slow requests). The rest of
``channels/`` is the comm layer the roles talk over: the bus, the DML log, consumers and
publishers, the direct and in-process transports, and nats-server itself.
"""
