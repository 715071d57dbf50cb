// CPU-bound with a lot of garbage: builds and drops short-lived objects.
function makeItems(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push({ id: i, name: 'item' + i, tags: [i, i * 2, i * 3] });
  return out;
}
function score(items) {
  let s = 0;
  for (const it of items) s += it.tags.reduce(add, 0) + it.name.length;
  return s;
}
function add(a, b) { return a + b; }
function round() {
  const items = makeItems(20000);
  return score(items);
}
function main() {
  const end = Date.now() + 700;
  let total = 0;
  while (Date.now() < end) total += round();
  return total;
}
console.log(main());
