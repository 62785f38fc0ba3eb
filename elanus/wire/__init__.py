"""What the Elanus SDK and the servers both speak: the one wire codec of the Flight face.

Action bodies and results (``codec``: JSON and Arrow IPC, the error prefix that carries an
``ErrorCode``), the limits a body's shape is held to (``bodyshape``), a put's
acknowledgement (``putresult``) and TLS material (``tls``). The client SDK
(``elanus.client``) and the servers (``elanus.flight``, ``elanus.milvus``, ``elanus.webui``)
import it from here, so neither imports the other to read the same bytes.
"""
