#!/usr/bin/env python3
"""Memory per idle long-poll of one sync-relay (docs/BENCHMARKS.md, "Memory per idle long-poll").

Starts `sync-relay serve` on a fresh SQLite database (loopback, an ephemeral port), opens N long-polls
with wait=120 in two waves of N/2, waits until the relay's /metrics shows them all waiting, and reports
the relay's VmRSS growth over the second wave per long-poll. WRAP="heaptrack -o FILE" runs the relay
under a profiler.

    python3 scripts/idle-longpoll-probe.py .build/release/sync-relay 4000
"""
import glob, os, signal, socket, subprocess, sys, tempfile, time

relay, count = sys.argv[1], int(sys.argv[2])
environment = dict(os.environ)
wrap = environment.pop('WRAP', '').split()
folder = tempfile.mkdtemp()
database = ['--database', folder + '/relay.sqlite']
subprocess.run([relay, 'account', 'create', 'acct'] + database, check=True, stdout=subprocess.DEVNULL)
token = subprocess.run([relay, 'token', 'issue', 'acct'] + database, check=True, capture_output=True, text=True).stdout.strip()
server = subprocess.Popen(wrap + [relay, 'serve'] + database + ['--host', '127.0.0.1', '--port', '0', '--log-level', 'warning'],
                          stdout=subprocess.PIPE, env=environment)
while True:
    line = server.stdout.readline().decode()
    if not line:
        sys.exit('sync-relay did not say where it listens')
    try:
        port = int(line.strip().split(':')[-1])
        break
    except ValueError:
        pass


def descendants(pid):
    found = []
    for path in glob.glob(f'/proc/{pid}/task/*/children'):
        for child in open(path).read().split():
            found += [int(child)] + descendants(int(child))
    return found


def relay_pid():
    for pid in [server.pid] + descendants(server.pid):
        try:
            if 'sync-relay' in open(f'/proc/{pid}/cmdline').read():
                return pid
        except OSError:
            pass
    return server.pid


def resident_kb():
    for line in open(f'/proc/{relay_pid()}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return 0


def waiting():
    with socket.create_connection(('127.0.0.1', port), timeout=10) as connection:
        connection.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        data = b''
        while chunk := connection.recv(65536):
            data += chunk
    for line in data.decode().split('\n'):
        if line.startswith('relay_waiting_polls '):
            return int(float(line.split()[1]))
    return 0


polls, resident = [], []
try:
    for wave in range(2):
        for _ in range(count // 2):
            poll = socket.create_connection(('127.0.0.1', port), timeout=10)
            poll.sendall(f'GET /v1/accounts/acct/segments?after=0&wait=120 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n'.encode())
            polls.append(poll)
        deadline = time.time() + 60
        while waiting() < len(polls) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        resident.append(resident_kb())
    print(f'{waiting()} waiting; relay RSS {resident[0]} kB with {count // 2}, {resident[1]} kB with {count}: '
          f'{(resident[1] - resident[0]) / (count - count // 2):.1f} KB per further idle long-poll')
finally:
    for poll in polls:
        poll.close()
    os.kill(relay_pid(), signal.SIGKILL if wrap else signal.SIGTERM)
    server.wait(timeout=60)
