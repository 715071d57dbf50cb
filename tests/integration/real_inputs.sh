# Inputs for the real programs that test_sampler_real.sh and bench/real_programs.sh profile
# (sourced; needs PY set to a python3):
#   real_inputs DIR SECS — DIR/busy.py, a pure-Python loop running SECS seconds, and
#   DIR/data.txt, ~5 MiB of words from a small vocabulary that `xz -9 -T1` spends ~3 s on.
real_inputs() {
  cat >"$1/busy.py" <<PYEOF
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def words(i):
    return sorted(str(k * 7919 % 1000) for k in range(i))
end = time.time() + $2
while time.time() < end:
    fib(16)
    d = {w: len(w) for w in words(1500)}
    "".join(sorted(d)).count("9")
PYEOF
  $PY - "$1/data.txt" <<'PYEOF'
import random, sys
r = random.Random(7)
words = ["".join(r.choice("abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(5000)]
with open(sys.argv[1], "w") as f:
    for _ in range(800_000):
        f.write(r.choice(words) + (" " if r.random() < 0.9 else "\n"))
PYEOF
}
