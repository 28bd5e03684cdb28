#!/usr/bin/env python3
"""A loopback file server for the weights download tests: serves ROOT on 127.0.0.1 at a free port, honours
single-range "Range: bytes=N-" requests (206), and can cut its first whole-file answer short.

  weights_server.py ROOT PORT_FILE LOG_FILE [--cut-first N] [--ignore-range]

PORT_FILE receives the port once the server listens; LOG_FILE gets one line per request:
"GET /path range=<Range header or ->".
"""
import argparse
import http.server
import os
import re
import socketserver


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("port_file")
    parser.add_argument("log_file")
    parser.add_argument("--cut-first", type=int, default=-1, help="close the first whole-file answer after N bytes")
    parser.add_argument("--ignore-range", action="store_true", help="answer every request with the whole file (200)")
    args = parser.parse_args()
    state = {"cut": args.cut_first}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *unused):
            pass

        def do_GET(self):
            header = self.headers.get("Range")
            with open(args.log_file, "a") as log:
                log.write("GET %s range=%s\n" % (self.path, header or "-"))
            path = os.path.join(args.root, self.path.lstrip("/").split("?")[0])
            if not os.path.isfile(path):
                self.send_error(404)
                return
            data = open(path, "rb").read()
            match = re.fullmatch(r"bytes=(\d+)-", header or "") if not args.ignore_range else None
            start = int(match.group(1)) if match else 0
            if match and start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if match else 200)
            if match:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Connection", "close")
            self.end_headers()
            body = data[start:]
            if state["cut"] >= 0 and not match:
                body = body[: state["cut"]]
                state["cut"] = -1
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    with socketserver.TCPServer(("127.0.0.1", 0), Handler) as server:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
        server.serve_forever()


if __name__ == "__main__":
    main()
