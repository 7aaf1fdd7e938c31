# A WebSocket echo server from Debian's python3-websockets (10.x, legacy
# asyncio API), serving on the listening socket inherited as fd 3. The first
# message it sends names the request path and the Via and X-Forwarded-For
# headers it received; then it echoes every message.
import asyncio
import json
import socket

import websockets


async def echo(ws, path):
    await ws.send(json.dumps({
        "path": path,
        "via": ws.request_headers.get("Via", ""),
        "xff": ws.request_headers.get("X-Forwarded-For", ""),
    }))
    async for msg in ws:
        await ws.send(msg)


async def main():
    sock = socket.socket(fileno=3)
    async with websockets.serve(echo, sock=sock, max_size=None):
        await asyncio.Future()


asyncio.run(main())
