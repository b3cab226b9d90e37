// Curator's InterProcessMutex under contention, for dlock's BenchmarkMutex (make bench).
//
//   java CuratorBench SERVERS PATH CONTENDERS N
//
// CONTENDERS threads, each with a CuratorFramework (a ZooKeeper session) of its own, share N
// acquire/release rounds on one lock. First a warm-up of max(300, N/3) rounds lets the JIT compile
// the hot paths; then it prints "READY", waits for a line on stdin, runs the N timed rounds and
// prints "DONE <nanoseconds>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    public static void main(String[] a) throws Exception {
        if (a.length != 4) {
            System.err.println("usage: CuratorBench SERVERS PATH CONTENDERS N");
            System.exit(2);
        }
        String servers = a[0], path = a[1];
        int contenders = Integer.parseInt(a[2]);
        long n = Long.parseLong(a[3]);
        List<CuratorFramework> clients = new ArrayList<>();
        List<InterProcessMutex> locks = new ArrayList<>();
        for (int i = 0; i < contenders; i++) {
            CuratorFramework c = CuratorFrameworkFactory.newClient(servers, 10000, 10000, new ExponentialBackoffRetry(100, 5));
            c.start();
            c.blockUntilConnected();
            clients.add(c);
            locks.add(new InterProcessMutex(c, path));
        }
        run(locks, Math.max(300, n / 3));
        System.out.println("READY");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        long start = System.nanoTime();
        run(locks, n);
        System.out.println("DONE " + (System.nanoTime() - start));
        System.out.flush();
        for (CuratorFramework c : clients) c.close();
    }

    static void run(List<InterProcessMutex> locks, long n) throws Exception {
        AtomicLong next = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        List<Exception> errors = new ArrayList<>();
        for (InterProcessMutex m : locks) {
            Thread t = new Thread(() -> {
                try {
                    while (next.incrementAndGet() <= n) {
                        m.acquire();
                        m.release();
                    }
                } catch (Exception e) {
                    synchronized (errors) { errors.add(e); }
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) t.join();
        if (!errors.isEmpty()) throw errors.get(0);
    }
}
