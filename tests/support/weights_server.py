#!/usr/bin/env python3
"""A loopback file server for the weights download and remote shard tests: serves ROOT on 127.0.0.1 at a free port,
one thread per connection, honours single-range requests ("Range: bytes=N-" and "bytes=N-M", 206, the connection
kept open), sends a file's validators as nginx does (a strong ETag of its modification time and size, and its
Last-Modified date) unless told not to, and can cut its first whole-file answer short or every K-th range answer, send whole files slowly, or
leave whole-file requests for .tar files unanswered.

  weights_server.py ROOT PORT_FILE LOG_FILE [--cut-first N] [--ignore-range] [--cut-every K] [--slow-whole MS]
                    [--hang-whole-tar] [--no-validators] [--touch-after-cut]

PORT_FILE receives the port once the server listens; LOG_FILE gets one line per request:
"GET /path range=<Range header or ->".
"""
import argparse
import email.utils
import http.server
import os
import re
import socketserver
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("port_file")
    parser.add_argument("log_file")
    parser.add_argument("--cut-first", type=int, default=-1, help="close the first whole-file answer after N bytes")
    parser.add_argument("--ignore-range", action="store_true", help="answer every request with the whole file (200)")
    parser.add_argument("--cut-every", type=int, default=0,
                        help="close every K-th range answer after half its bytes (a dropped connection)")
    parser.add_argument("--slow-whole", type=int, default=0,
                        help="send whole-file answers 512 bytes at a time, MS milliseconds apart (a slow link)")
    parser.add_argument("--hang-whole-tar", action="store_true",
                        help="answer nothing, for 10 minutes, to a whole-file request for a .tar (a stalled server)")
    parser.add_argument("--no-validators", action="store_true", help="send neither ETag nor Last-Modified")
    parser.add_argument("--touch-after-cut", action="store_true",
                        help="after the cut of --cut-first, move the file's modification time on (a file replaced)")
    args = parser.parse_args()
    state = {"cut": args.cut_first, "ranges": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm the body waits for the client's delayed ACK
        # (40 ms a request on Linux), which no real server makes a client wait.
        disable_nagle_algorithm = True

        def log_message(self, *unused):
            pass

        def send_validators(self, path):
            if args.no_validators:
                return
            st = os.stat(path)
            self.send_header("ETag", '"%x-%x"' % (st.st_mtime_ns, st.st_size))
            self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))

        def do_GET(self):
            header = self.headers.get("Range")
            with lock, open(args.log_file, "a") as log:
                log.write("GET %s range=%s\n" % (self.path, header or "-"))
            path = os.path.join(args.root, self.path.lstrip("/").split("?")[0])
            if not os.path.isfile(path):
                self.send_error(404)
                return
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", header or "") if not args.ignore_range else None
            start = int(match.group(1)) if match else 0
            if match and match.group(2):  # a closed range: only its bytes are read (shards are large)
                self.send_range(path, start, int(match.group(2)) + 1)
                return
            if args.hang_whole_tar and not match and path.endswith(".tar"):
                time.sleep(600)
                return
            data = open(path, "rb").read()
            if match and start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if match else 200)
            if match:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            self.send_validators(path)
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
                if args.touch_after_cut:
                    st = os.stat(path)
                    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
                return
            if args.slow_whole > 0 and not match:
                for at in range(0, len(body), 512):
                    self.wfile.write(body[at : at + 512])
                    self.wfile.flush()
                    time.sleep(args.slow_whole / 1000)
                return
            self.wfile.write(body)

        def send_range(self, path, start, end):
            size = os.path.getsize(path)
            end = min(end, size)
            if start >= end:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with lock:
                state["ranges"] += 1
                cut = args.cut_every > 0 and state["ranges"] % args.cut_every == 0
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read(end - start)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
            self.send_validators(path)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if cut:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data)

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        daemon_threads = True
        request_queue_size = 128  # the default 5 drops the connections of 8 threads at once: a 1 s SYN retry

    with Server(("127.0.0.1", 0), Handler) as server:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
        server.serve_forever()


if __name__ == "__main__":
    main()
