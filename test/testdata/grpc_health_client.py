# A gRPC client from Debian's python3-grpcio (gRPC C-core, its own HTTP/2):
# calls grpc.health.v1.Health on argv[1] without generated code (the
# messages are hand-encoded protobuf: field 1), over h2c, or over TLS when
# argv[2] names the server's certificate. Prints one JSON line.
import json
import sys

import grpc

SERVING = b"\x08\x01"


def req(service):
    b = service.encode()
    return b"\x0a" + bytes([len(b)]) + b if b else b""


def main(target, cert=None):
    if cert:
        creds = grpc.ssl_channel_credentials(root_certificates=open(cert, "rb").read())
        ch = grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "localhost")])
    else:
        ch = grpc.insecure_channel(target)
    out = {}
    check = ch.unary_unary("/grpc.health.v1.Health/Check")
    resp, call = check.with_call(req("svc"), timeout=10, metadata=[("x-test", "1")])
    out["check"] = resp == SERVING
    out["trailers_code"] = call.code().name
    try:
        check(req("unknown"), timeout=10)
        out["unknown"] = "OK"
    except grpc.RpcError as e:
        out["unknown"] = e.code().name
    ok = 0
    for _ in range(200):
        ok += check(req("svc"), timeout=10) == SERVING
    out["repeated_ok"] = ok
    watch = ch.unary_stream("/grpc.health.v1.Health/Watch")
    stream = watch(req("svc"), timeout=10)
    out["watch_first"] = next(stream) == SERVING
    stream.cancel()
    ch.close()
    print(json.dumps(out))


main(*sys.argv[1:])
