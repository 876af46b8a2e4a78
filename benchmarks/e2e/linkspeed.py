"""Throughput of one TCP stream, to check a topology's links (tbf keeps ~96 % of its rate).
  linkspeed.py serve PORT              accept one connection and read it to the end
  linkspeed.py send HOST PORT SECONDS  send for SECONDS, print the bits per second that arrived
  linkspeed.py flood HOST PORT         send until SIGTERM (line-rate traffic next to a compute run)"""
import signal
import socket
import sys
import time


def serve(port):
    with socket.create_server(("", port)) as server:
        conn, _ = server.accept()
        with conn:
            while conn.recv(1 << 20):
                pass
            conn.sendall(b"done")  # the sender's clock stops when everything has arrived


def connect(host, port):
    for _ in range(100):  # the server may not be listening yet
        try:
            return socket.create_connection((host, port))
        except ConnectionRefusedError:
            time.sleep(0.05)
    sys.exit(f"linkspeed: nothing listens on {host}:{port}")


def send(host, port, seconds):
    block = bytes(1 << 20)
    with connect(host, port) as conn:
        sent, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            conn.sendall(block)
            sent += len(block)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(4)
        print(int(sent * 8 / (time.perf_counter() - start)))


def flood(host, port):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    block = bytes(1 << 20)
    with connect(host, port) as conn:
        while not stop:
            conn.sendall(block)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(4)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]))
    elif sys.argv[1:2] == ["send"]:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1:2] == ["flood"]:
        flood(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
