#!/usr/bin/env python3
"""A stand-in for a llama.cpp server that crashes on every generation, as llama.cpp's AMX path did:
``/v1/models`` answers, a chat completion kills the process with SIGSEGV. Used as the ``python`` of
``LlamaServer`` (it ignores the module and model it is given, and answers ``-c`` probes with success)."""

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "crashing"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        print("ggml_backend_amx_mul_mat: about to crash (stand-in)", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)


def main(argv: list[str]) -> None:
    if argv[:1] == ["-c"]:
        return  # the "is llama_cpp.server importable" probe
    port = int(argv[argv.index("--port") + 1])
    print("amx repack tensor blk.0.attn_q.weight of type q4_K (stand-in)", flush=True)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
