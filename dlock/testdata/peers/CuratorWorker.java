// A peer process for dlock's mixed-fleet tests: Apache Curator's lock recipes (Debian's
// libcurator-recipes-java), with the critical section every peer worker shares (see section).
//
//   java CuratorWorker SERVERS PATH KIND N ID DIR HOLD_MS
//
// KIND is mutex (InterProcessMutex), read or write (InterProcessReadWriteLock). Once connected it
// prints "READY" and waits for the file DIR/go, so that a fleet starts contending at once whatever
// each runtime takes to start; then it prints "HELD i" after each acquisition and
// "RESULT acquired=N overlaps=M" at the end.
//
// With PEER_ZK_AUTH=user:password in its environment it authenticates with digest
// (authorization) and gives every node it creates the ACL dlock.WithDigest gives (an ACLProvider):
// everything to that identity, reading to anyone.
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorWorker {
    public static void main(String[] a) throws Exception {
        if (a.length != 7) {
            System.err.println("usage: CuratorWorker SERVERS PATH KIND N ID DIR HOLD_MS");
            System.exit(2);
        }
        String servers = a[0], path = a[1], kind = a[2], id = a[4];
        int n = Integer.parseInt(a[3]);
        Path dir = Paths.get(a[5]);
        long hold = Long.parseLong(a[6]);
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder().connectString(servers)
            .sessionTimeoutMs(10000).connectionTimeoutMs(10000).retryPolicy(new ExponentialBackoffRetry(100, 5));
        String auth = System.getenv("PEER_ZK_AUTH");
        if (auth != null && !auth.isEmpty()) {
            // a mutable list: ZooKeeper's validateACL asks it whether it contains null, which
            // List.of answers with a NullPointerException
            List<ACL> acl = new ArrayList<>(Arrays.asList(
                new ACL(ZooDefs.Perms.ALL, new Id("digest", DigestAuthenticationProvider.generateDigest(auth))),
                new ACL(ZooDefs.Perms.READ, ZooDefs.Ids.ANYONE_ID_UNSAFE)));
            b = b.authorization("digest", auth.getBytes(StandardCharsets.UTF_8)).aclProvider(new ACLProvider() {
                @Override public List<ACL> getDefaultAcl() { return acl; }
                @Override public List<ACL> getAclForPath(String p) { return acl; }
            });
        }
        CuratorFramework c = b.build();
        c.start();
        c.blockUntilConnected();
        InterProcessLock lock;
        switch (kind) {
            case "mutex": lock = new InterProcessMutex(c, path); break;
            case "read": lock = new InterProcessReadWriteLock(c, path).readLock(); break;
            case "write": lock = new InterProcessReadWriteLock(c, path).writeLock(); break;
            default: throw new IllegalArgumentException("kind " + kind);
        }
        System.out.println("READY");
        System.out.flush();
        while (!Files.exists(dir.resolve("go"))) Thread.sleep(5);
        int overlaps = 0;
        for (int i = 0; i < n; i++) {
            lock.acquire();
            System.out.println("HELD " + i);
            System.out.flush();
            overlaps += section(kind, dir, id, i, hold);
            lock.release();
        }
        System.out.println("RESULT acquired=" + n + " overlaps=" + overlaps);
        System.out.flush();
        c.close();
    }

    // section is the shared critical section: a writer creates DIR/writer exclusively, sees no
    // reader, adds one to DIR/counter by read, wait, write (a lost update shows as a short count)
    // and appends its id to DIR/order; a reader leaves a marker in DIR/readers and sees no writer.
    static int section(String kind, Path dir, String id, int i, long hold) throws Exception {
        int overlaps = 0;
        if (kind.equals("read")) {
            Path me = dir.resolve("readers").resolve(id + "-" + i);
            Files.createFile(me);
            if (Files.exists(dir.resolve("writer"))) overlaps++;
            Thread.sleep(hold);
            Files.delete(me);
            return overlaps;
        }
        Path w = dir.resolve("writer");
        boolean mine = true;
        try {
            Files.createFile(w);
        } catch (FileAlreadyExistsException e) {
            overlaps++;
            mine = false;
        }
        try (Stream<Path> s = Files.list(dir.resolve("readers"))) {
            if (s.findAny().isPresent()) overlaps++;
        }
        long v = Long.parseLong(Files.readString(dir.resolve("counter")).trim());
        Thread.sleep(hold);
        Path tmp = dir.resolve("counter." + id);
        Files.writeString(tmp, Long.toString(v + 1));
        Files.move(tmp, dir.resolve("counter"), StandardCopyOption.ATOMIC_MOVE);
        Files.write(dir.resolve("order"), (id + "\n").getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        if (mine) Files.delete(w);
        return overlaps;
    }
}
