// workload.js — a small CPU-bound JavaScript program profiled with
//   node --cpu-prof --cpu-prof-dir=DIR --cpu-prof-name=workload.cpuprofile workload.js
// to produce tests/data/cpuprofile/workload.cpuprofile. hotA does about twice the work of
// hotB; an anonymous arrow function and a recursive fib give the importer named and
// anonymous funcs, several scripts lines and recursion.
'use strict';

function hotA(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = (x * 1103515245 + 12345) % 2147483647;
  return x;
}

function hotB(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i) | 0;
  return s;
}

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

const mix = (rounds) => {
  let acc = 0;
  for (let r = 0; r < rounds; r++) {
    acc += hotA(200000);
    acc += hotB(100000);
    if (r % 10 === 0) acc += fib(18);
  }
  return acc;
};

const deadline = Date.now() + Number(process.argv[2] || 600);
let total = 0;
while (Date.now() < deadline) total += mix(5);
console.log(total % 1000);
