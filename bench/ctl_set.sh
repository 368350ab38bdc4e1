#!/usr/bin/env bash
# The cost of adding rules at runtime: N `set`s sent one after another to a
# mount's control socket (one connection each, as `slowfs ctl MNT set` makes),
# in three forms of rule: no path, a path with a literal prefix
# (dirI/**/*.db), and an unanchored glob (**/*.xI). Prints the time per set
# over each tenth of the run: flat is linear, growing is quadratic.
#   bench/ctl_set.sh [N]        (default 10000)
source "$(dirname "$0")/lib.sh"
n=${1:-10000}
bin=$slowfs
work=$(mktemp -d)
trap 'for m in "$work"/m*; do [[ -d $m ]] && umount "$m" 2>/dev/null; done; rm -rf "$work"' EXIT
for form in none prefix unanchored; do
  mkdir -p "$work/b-$form" "$work/m-$form"
  $bin mount --background --quiet --ctl-socket "$work/$form.sock" \
    --backing "$work/b-$form" "$work/m-$form"
  python3 - "$work/$form.sock" "$n" "$form" <<'PY'
import json, socket, sys, time
path, n, form = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rule(i):
    return {"none": f"read delay={i + 1}us",
            "prefix": f"read path=dir{i}/**/*.db delay=1ms",
            "unanchored": f"read path=**/*.x{i} delay=1ms"}[form]
def ask(command):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall((json.dumps(command) + "\n").encode())
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    s.close()
    reply = json.loads(answer)
    assert reply["ok"], reply
    return reply
tenth = max(1, n // 10)
start = last = time.perf_counter()
per = []
for i in range(n):
    ask({"cmd": "set", "rule": rule(i)})
    if (i + 1) % tenth == 0:
        now = time.perf_counter()
        per.append((now - last) / tenth * 1e3)
        last = now
total = time.perf_counter() - start
print(f"{form:<11} {n} sets in {total:7.2f} s; ms per set by tenth: "
      + " ".join(f"{p:.2f}" for p in per))
PY
  umount "$work/m-$form"
done
