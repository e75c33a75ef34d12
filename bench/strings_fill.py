#!/usr/bin/python3
"""Fill-phase probe: SET of N new keys of SIZE bytes over one connection (the
LMCache pattern: new chunks, nothing overwritten, so no freed block to reuse),
reporting the server's CPU-seconds per GB and minor page faults per value (from
/proc/<pid>/stat over the fill). Server pinned to core 0, client to core 1.

    /usr/bin/python3 bench/strings_fill.py pion|redis BUILD_BIN_DIR SIZE N [server args...]
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def main():
    kind, bindir, size, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    extra = sys.argv[5:]
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp(prefix='strings-fill-')
    if kind == 'pion':
        args = [os.path.join(bindir, 'pion-server'), '--kvcache', '--port', str(port),
                '--bind', '127.0.0.1', '--dir', d, '--appendonly', 'no'] + extra
    else:
        args = ['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--dir', d,
                '--appendonly', 'no', '--save', ''] + extra
    p = subprocess.Popen(['taskset', '-c', '0'] + args, stdout=open(d + '/log', 'w'),
                         stderr=subprocess.STDOUT)
    try:
        for _ in range(200):  # bounded wait for the listener
            try:
                socket.create_connection(('127.0.0.1', port)).close()
                break
            except OSError:
                time.sleep(0.05)

        def stat():
            f = open('/proc/%d/stat' % p.pid).read().rsplit(')', 1)[1].split()
            return int(f[7]), int(f[11]) + int(f[12])  # minflt, utime + stime

        val = os.urandom(64) * (size // 64)
        os.sched_setaffinity(0, {1})

        def fill(prefix, count):
            c = socket.create_connection(('127.0.0.1', port))

            def send():
                for i in range(count):
                    k = b'%s%d' % (prefix, i)
                    c.sendall(b'*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n' % (len(k), k, size))
                    c.sendall(val)
                    c.sendall(b'\r\n')

            t = threading.Thread(target=send)
            t.start()
            got = b''
            while got.count(b'\r\n') < count:
                chunk = c.recv(65536)
                if not chunk:
                    raise SystemExit('server closed the connection: %r' % got[-200:])
                got += chunk
            t.join()
            c.close()
            if got != b'+OK\r\n' * count:
                raise SystemExit('unexpected reply: %r' % got[:200])

        fill(b'warm', 4)
        f0, c0 = stat()
        t0 = time.time()
        fill(b'k', n)
        t1 = time.time()
        f1, c1 = stat()
        gb = n * size / 1e9
        print('%s fill %d x %d B: server %.3f CPU-s/GB, %.0f minor faults per value, %.2f GB/s'
              % (kind, n, size, (c1 - c0) / os.sysconf('SC_CLK_TCK') / gb, (f1 - f0) / n,
                 gb / (t1 - t0)))
    finally:
        p.terminate()
        p.wait()


if __name__ == '__main__':
    main()
