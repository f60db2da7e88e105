#!/usr/bin/env python3
"""A loopback HTTP/1.1 proxy that sends each request to the next of several relays in turn.

Used by the relay's scale-out tests and benchmarks so that a syncd node reaches another relay on every
request, whatever connection it keeps open (keep-alive is honoured towards the client; each request opens
a fresh connection to its relay). Only for 127.0.0.1: it binds there and forwards there.

    relay-round-robin.py PORT_FILE UPSTREAM_PORT [UPSTREAM_PORT ...]

It listens on a free port, writes it to PORT_FILE, and stops when its standard input closes (the process
that started it ended) or on SIGTERM.
"""
import http.client
import http.server
import itertools
import os
import sys
import threading

upstreams = [int(port) for port in sys.argv[2:]]
turn = itertools.cycle(range(len(upstreams)))
turn_lock = threading.Lock()
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with turn_lock:
            index = next(turn)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        try:
            upstream = http.client.HTTPConnection("127.0.0.1", upstreams[index], timeout=3600)
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        except OSError as error:
            message = ('{"code":"unavailable","message":"relay %d unreachable: %s"}' % (upstreams[index], error)).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("X-Relay-Port", str(upstreams[index]))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_DELETE = do_POST = forward


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as handle:
        handle.write(str(server.server_address[1]))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the parent goes away
    server.shutdown()


if __name__ == "__main__":
    main()
