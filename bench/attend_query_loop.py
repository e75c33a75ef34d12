#!/usr/bin/python3
"""Load for the attend suite's "PING while another client queries" row: sends
ATTEND.PREFIX.QUERY on session 'long' (H 8, D 128, M 1) back to back, reading each
reply before the next, and prints 'ready' after the first one. Runs until killed.

    attend_query_loop.py PORT N
"""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from pion import _resp  # noqa: E402


def main():
    port = int(sys.argv[1])
    h, d = 8, 128
    q = struct.pack('<%df' % (h * d), *[((i * 7) % 13 - 6) / 6.0 for i in range(h * d)])
    cmd = _resp.encode('ATTEND.PREFIX.QUERY', 'long', 0, h, d, 1, q)
    reader = _resp.SocketReader(socket.create_connection(('127.0.0.1', port)), 1 << 20)
    first = True
    while True:
        reader.sock.sendall(cmd)
        reply = reader.read()
        if not isinstance(reply, bytearray) or len(reply) != h * d * 4:
            sys.exit('unexpected reply %r' % (reply,)[:200])
        if first:
            print('ready', flush=True)
            first = False


if __name__ == '__main__':
    main()
