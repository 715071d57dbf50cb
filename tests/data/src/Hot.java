// A CPU-bound Java program whose time is in one JIT-compiled method, hotLoop
// (tests/integration/test_symbolizer_jvm.sh). Prints its pid first: the JVM's perf map is
// /tmp/perf-PID.map. Argument: seconds to run (default 2).
public class Hot {
    static long hotLoop(long n, long seed) {
        long x = seed;
        for (long i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= (x >>> 29);
        }
        return x;
    }

    static long driver(double seconds) {
        long end = System.nanoTime() + (long) (seconds * 1e9), acc = 0;
        while (System.nanoTime() < end)
            acc += hotLoop(2_000_000, acc);
        return acc;
    }

    public static void main(String[] args) {
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        System.out.println(driver(args.length > 0 ? Double.parseDouble(args[0]) : 2.0));
    }
}
