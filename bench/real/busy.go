// A CPU-bound Go program for bench/real_programs.sh: hashing, sorting and map work on
// the main goroutine. Argument: seconds (default 3).
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

func hashRounds(n int) byte {
	b := []byte("canopy")
	for i := 0; i < n; i++ {
		s := sha256.Sum256(b)
		b = s[:]
	}
	return b[0]
}

func sortWords(n int) int {
	w := make([]string, n)
	for i := range w {
		w[i] = strconv.Itoa(i * 7919 % 10007)
	}
	sort.Strings(w)
	m := map[string]int{}
	for _, s := range w {
		m[s] += len(s)
	}
	return len(m)
}

func main() {
	secs := 3.0
	if len(os.Args) > 1 {
		secs, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	acc := 0
	for time.Now().Before(end) {
		acc += int(hashRounds(2000)) + sortWords(3000)
	}
	fmt.Println(acc)
}
