# A WebSocket client from Debian's python3-websockets (10.x): connects to
# argv[1], reads the server's greeting, sends text and binary messages (up to
# 1 MiB), a ping, and closes with 1000; prints one JSON line of what it saw.
import asyncio
import hashlib
import json
import ssl
import sys

import websockets


async def main(url):
    ctx = None
    if url.startswith("wss:"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    out = {"echoed": 0, "mismatched": 0}
    async with websockets.connect(url, ssl=ctx, max_size=None) as ws:
        out["greeting"] = json.loads(await ws.recv())
        msgs = ["hello %d" % i for i in range(50)]
        msgs += [bytes((i * 7 + j) % 256 for j in range(n)) for i, n in enumerate([1, 125, 126, 65535, 65536, 1 << 20])]
        for m in msgs:
            await ws.send(m)
            got = await ws.recv()
            if got == m:
                out["echoed"] += 1
            else:
                out["mismatched"] += 1
        pong = await ws.ping(b"veer")
        await asyncio.wait_for(pong, 5)
        out["pong"] = True
        await ws.close(code=1000, reason="done")
        out["close_code"] = ws.close_code
    print(json.dumps(out))


asyncio.run(asyncio.wait_for(main(sys.argv[1]), 20))
