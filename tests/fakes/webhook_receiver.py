"""A partner's webhook receiver on 127.0.0.1: records every POST and answers ``status``.

``keep_alive``: answers in HTTP/1.1 with a Content-Length, so a client may send its next POST on
the same connection; ``close_idle``: it then closes each connection right after answering, as a
server whose idle timeout has run out, without saying so. ``connections`` counts the connections
accepted."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, status: int = 200, *, keep_alive: bool = False, close_idle: bool = False):
        self.status, self.requests, self.paths = status, [], []
        self.connections = 0
        self.closed = threading.Event()  # set each time ``close_idle`` closed a connection
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True

            def setup(self):
                super().setup()
                receiver.connections += 1

            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.headers, body))
                receiver.paths.append(self.path)
                self.send_response(receiver.status)
                if keep_alive:
                    self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                if close_idle:
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    self.close_connection = True
                    receiver.closed.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
