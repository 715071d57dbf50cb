// A CPU-bound JavaScript program for bench/real_programs.sh (run with --perf-basic-prof):
// recursion, string building and sorting. Argument: seconds (default 3).
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function words(n) {
  const out = [];
  for (let k = 0; k < n; k++) out.push(String((k * 7919) % 1000));
  return out.sort();
}
function round() {
  const d = new Map();
  for (const w of words(1500)) d.set(w, w.length);
  return fib(18) + [...d.keys()].join('').length;
}
const end = Date.now() + 1000 * (Number(process.argv[2]) || 3);
let acc = 0;
while (Date.now() < end) acc += round();
console.log(acc);
