"""A loopback identity provider for running the conformance suite's server scenarios
through edgar's team gateway: it publishes a key set (one P-256 public key, so the
gateway starts) and answers RFC 7662 introspection, calling the one opaque token in
EDGAR_SERVE_TOKEN active for RESOURCE (user "conformance", group "conformance") and any
other token inactive. Usage: team_idp.py RESOURCE; prints the port it listens on.
"""
import http.server
import json
import os
import sys
import time
import urllib.parse

RESOURCE = sys.argv[1]
TOKEN = os.environ["EDGAR_SERVE_TOKEN"]
JWKS = {"keys": [{"kty": "EC", "crv": "P-256", "kid": "conformance", "use": "sig", "alg": "ES256",
                  "x": "HCsy-m550A9cF31SCUw0jQbFJp_w-9k0wXgr6NcFyvw",
                  "y": "YSeq8AQbXtMlpUub3CxgJg9ma-S7f5zN4Gkl5aZaqOk"}]}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(JWKS)

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        issuer = "http://127.0.0.1:%d" % self.server.server_address[1]
        if form.get("token", [""])[0] == TOKEN:
            self.answer({"active": True, "sub": "conformance", "iss": issuer, "aud": RESOURCE,
                         "exp": int(time.time()) + 3600, "groups": ["conformance"]})
        else:
            self.answer({"active": False})


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
