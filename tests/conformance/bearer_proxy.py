"""A loopback proxy that adds `Authorization: Bearer TOKEN` to every request, for the
conformance suite's server scenarios: the suite cannot send a header of its own, and
`edgar mcp serve --http` answers nothing without the token. Host and Origin naming the
proxy are rewritten to name edgar; any other Host or Origin is passed on unchanged, so
the suite's DNS rebinding checks still reach edgar's own. Usage: bearer_proxy.py
UPSTREAM_URL (the token in EDGAR_SERVE_TOKEN); prints the port it listens on.
"""
import http.server
import os
import sys
import urllib.error
import urllib.request

UPSTREAM = sys.argv[1]
TOKEN = os.environ["EDGAR_SERVE_TOKEN"]
UP_AUTHORITY = UPSTREAM.split("/")[2]
HOP = {"host", "content-length", "connection", "transfer-encoding", "origin", "authorization"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one_request(self):
        # A client that hangs up (the suite's stream scenarios do) is not an error here.
        try:
            super().handle_one_request()
        except ConnectionError:
            self.close_connection = True

    def forward(self):
        me = "%s:%d" % self.server.server_address[:2]
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else None
        req = urllib.request.Request(UPSTREAM, data=body, method=self.command)
        for k, v in self.headers.items():
            if k.lower() not in HOP:
                req.add_header(k, v)
        host = self.headers.get("host") or me
        req.add_header("Host", UP_AUTHORITY if host in (me, "localhost:%d" % self.server.server_address[1]) else host)
        origin = self.headers.get("origin")
        if origin is not None:
            mine = origin in ("http://" + me, "http://localhost:%d" % self.server.server_address[1])
            req.add_header("Origin", "http://" + UP_AUTHORITY if mine else origin)
        req.add_header("Authorization", "Bearer " + TOKEN)
        try:
            answer = urllib.request.urlopen(req, timeout=60)
        except urllib.error.HTTPError as e:
            answer = e
        self.send_response(answer.status if hasattr(answer, "status") else answer.code)
        for k, v in answer.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        if (answer.headers.get("content-type") or "").startswith("text/event-stream"):
            # Passed on as it comes: a question edgar asks mid-call must reach the suite
            # before the call can end.
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                chunk = answer.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        data = answer.read()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = forward


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
