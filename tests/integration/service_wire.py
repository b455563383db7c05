"""The service's wire format, written independently of the C++ codec (docs/format.md, "The service's
wire protocol"), for the tests that talk to the daemons directly: well-formed requests with wrong keys,
and every kind of malformed input."""
import os
import socket
import struct

MAGIC = b"cnsv"
PROTOCOL = 2
T = {"error": 1, "register_rank": 2, "assigned": 3, "reassign": 4, "unregister": 5, "rank_usage": 6, "manager_hello": 16,
     "manager_welcome": 17, "start_agent": 18, "stop_agent": 19, "agent_up": 20, "agent_exit": 21,
     "agent_stats": 22, "status_request": 32, "status_reply": 33, "session_hello": 48, "session_welcome": 49,
     "flush": 50, "progress": 51, "credit": 52, "pushed": 53, "done": 54, "cancel": 55, "list_versions": 56,
     "version_list": 57}
NAME = {v: k for k, v in T.items()}


def frame(type_name, payload=b"", version=PROTOCOL, type_number=None):
    t = T[type_name] if type_number is None else type_number
    return MAGIC + struct.pack("<HHI", version, t, len(payload)) + payload


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<I", len(b)) + b


def register_rank(name, key, rank, nranks, prefix, mode=0, agents=1, provider="tcp;ofi_rxm"):
    return (s(name) + s("job-" + name) + key + struct.pack("<IIQd", rank, nranks, 0, 0.0) + s(prefix) +
            struct.pack("<I", 0) + struct.pack("<BIIQI", mode, agents, 128 << 10, 8 << 20, 0) + s(provider) +
            s("testhost") + struct.pack("<I", os.getpid()))


def reassign(app_id, key, rank, lost):
    return struct.pack("<Q", app_id) + key + struct.pack("<IQ", rank, lost)


def session_hello(app_id, key, rank, fabric_address=b"\x02\x00\x00\x01\x7f\x00\x00\x01" + bytes(8)):
    return struct.pack("<Q", app_id) + key + struct.pack("<I", rank) + s(fabric_address)


def list_versions(app_id, key):
    return struct.pack("<Q", app_id) + key


def manager_hello(name, host="127.0.0.1", capacity=2, token=""):
    return s(name) + s(host) + struct.pack("<II", capacity, os.getpid()) + s(token)


class Conn:
    def __init__(self, address, timeout=10):
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def read_frame(self):
        """(type name, payload), or None when the other side closed."""
        try:
            h = self.recv_exact(12)
        except (ConnectionResetError, socket.timeout):
            return None
        if h is None:
            return None
        magic, version, t, n = h[:4], *struct.unpack("<HHI", h[4:])
        assert magic == MAGIC and version == PROTOCOL, f"a daemon sent a bad header {h!r}"
        payload = self.recv_exact(n) if n else b""
        return NAME.get(t, str(t)), payload

    def closed(self):
        """True when the other side has closed (after reading whatever it sent)."""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def error_message(payload):
    code = struct.unpack("<i", payload[:4])[0]
    n = struct.unpack("<I", payload[4:8])[0]
    return code, payload[8:8 + n].decode(errors="replace")


def assigned(payload):
    app_id, slot, agent_id = struct.unpack("<QIQ", payload[:20])
    n = struct.unpack("<I", payload[20:24])[0]
    address = payload[24:24 + n].decode()
    return app_id, slot, agent_id, address
