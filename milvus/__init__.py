"""Milvus's face of the proxy: ``milvus.proto.milvus.MilvusService`` over gRPC, beside
Arrow Flight, in the same process and over the same proxy services (issue 23).

Every RPC maps onto the Flight action executors (``elanus.flight.actions.perform``) or the
DoPut/DoExchange internals, with the caller's identity; nothing here talks to a role."""
