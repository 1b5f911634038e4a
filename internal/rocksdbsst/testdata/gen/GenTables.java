// GenTables writes RocksDB table files with the real RocksDB (rocksdbjni) for
// the tests of internal/rocksdbsst, and what RocksDB itself reads from them.
//
//   flock /tmp/rebucket-jvm.lock java -cp rocksdbjni-9.8.4.jar GenTables.java OUTDIR
//
// OUTDIR/tables.tsv lists one single-table case per line (name, format_version,
// checksum, compression, index type, data block index type); each case is
// OUTDIR/<name>.sst with OUTDIR/<name>.live.tsv, the live rows (hex key TAB hex
// value) a RocksDB iterator sees. OUTDIR/multi/ holds the tables of one DB
// version with overlapping keys, written by several flushes, and
// multi/live.tsv. Each table holds several versions per key (a snapshot is
// held across the writes), deletions, single deletions, merges
// (StringAppendOperator, ","), a range deletion and many small data blocks.
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.rocksdb.*;

public class GenTables {
  record Case(String name, int fv, ChecksumType ck, CompressionType comp, IndexType idx,
      DataBlockIndexType dbi) {}

  static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  static String hex(byte[] x) {
    StringBuilder sb = new StringBuilder();
    for (byte v : x) sb.append(String.format("%02x", v & 0xff));
    return sb.toString();
  }

  static String key(int i) { return String.format("key%05d", i); }

  static String val(int i, String tag) {
    // Compressible, so every compression really compresses the blocks.
    return tag + "-" + i + "-" + "abcabcabcabcabcabcabcabcabcabc".substring(0, 10 + i % 20);
  }

  static Options options(Case c) {
    BlockBasedTableConfig t = new BlockBasedTableConfig()
        .setFormatVersion(c.fv)
        .setChecksumType(c.ck)
        .setBlockSize(256)
        .setBlockRestartInterval(4)
        .setIndexBlockRestartInterval(2)
        .setIndexType(c.idx)
        .setDataBlockIndexType(c.dbi)
        .setFilterPolicy(new BloomFilter(10));
    if (c.idx == IndexType.kTwoLevelIndexSearch) {
      t.setMetadataBlockSize(128).setPartitionFilters(true);
    }
    Options o = new Options()
        .setCreateIfMissing(true)
        .setMergeOperator(new StringAppendOperator())
        .setDisableAutoCompactions(true)
        .setCompressionType(c.comp)
        .setTableFormatConfig(t);
    if (c.idx == IndexType.kHashSearch) {
      o.useFixedLengthPrefixExtractor(5);
    }
    return o;
  }

  static void flush(RocksDB db) throws RocksDBException {
    try (FlushOptions fo = new FlushOptions().setWaitForFlush(true)) {
      db.flush(fo);
    }
  }

  static void dumpLive(RocksDB db, Path out) throws IOException {
    try (ReadOptions ro = new ReadOptions().setTotalOrderSeek(true);
        RocksIterator it = db.newIterator(ro);
        PrintWriter w = new PrintWriter(Files.newBufferedWriter(out))) {
      for (it.seekToFirst(); it.isValid(); it.next()) {
        w.println(hex(it.key()) + "\t" + hex(it.value()));
      }
    }
  }

  static List<Path> ssts(Path dir) throws IOException {
    List<Path> l = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*.sst")) {
      for (Path p : ds) l.add(p);
    }
    Collections.sort(l);
    return l;
  }

  static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) return;
    try (var s = Files.walk(p)) {
      s.sorted(Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
    }
  }

  // single writes one flush with several versions per key.
  static void single(Case c, Path out) throws Exception {
    Path dir = Files.createTempDirectory("gentables");
    try (Options o = options(c); RocksDB db = RocksDB.open(o, dir.toString())) {
      int n = 160;
      for (int i = 0; i < n; i++) db.put(b(key(i)), b(val(i, "v1")));
      Snapshot snap = db.getSnapshot(); // keeps the older versions in the flush
      for (int i = 0; i < n; i++) {
        if (i % 3 == 0) db.put(b(key(i)), b(val(i, "v2")));
        else if (i % 7 == 1) db.delete(b(key(i)));
        else if (i % 11 == 2) db.singleDelete(b(key(i)));
        else if (i % 5 == 4) db.merge(b(key(i)), b("m" + i));
      }
      for (int i = 0; i < 12; i++) db.merge(b("merge-only" + i), b("a" + i));
      for (int i = 0; i < 12; i += 2) db.merge(b("merge-only" + i), b("b" + i));
      db.deleteRange(b(key(100)), b(key(120)));
      db.put(b(key(105)), b(val(105, "after-range")));
      db.merge(b(key(107)), b("after-range"));
      flush(db);
      db.releaseSnapshot(snap);
      List<Path> s = ssts(dir);
      if (s.size() != 1) throw new IllegalStateException(c.name + ": " + s.size() + " tables");
      Files.copy(s.get(0), out.resolve(c.name + ".sst"), StandardCopyOption.REPLACE_EXISTING);
      dumpLive(db, out.resolve(c.name + ".live.tsv"));
    } finally {
      deleteTree(dir);
    }
  }

  // multi writes several flushes whose keys overlap: newer puts, deletions,
  // single deletions, merges and a range deletion shadow older tables.
  static void multi(Path out) throws Exception {
    Case c = new Case("multi", 5, ChecksumType.kXXH3, CompressionType.LZ4_COMPRESSION,
        IndexType.kBinarySearch, DataBlockIndexType.kDataBlockBinarySearch);
    Path dir = Files.createTempDirectory("gentables");
    Path md = out.resolve("multi");
    deleteTree(md);
    Files.createDirectories(md);
    try (Options o = options(c); RocksDB db = RocksDB.open(o, dir.toString())) {
      int n = 200;
      for (int i = 0; i < n; i++) db.put(b(key(i)), b(val(i, "t1")));
      flush(db);
      for (int i = 0; i < n; i += 4) db.put(b(key(i)), b(val(i, "t2")));
      for (int i = 1; i < n; i += 6) db.delete(b(key(i)));
      for (int i = 2; i < n; i += 10) db.merge(b(key(i)), b("t2m" + i));
      for (int i = 0; i < 20; i++) db.merge(b("mo" + i), b("x" + i));
      flush(db);
      for (int i = 3; i < n; i += 12) db.singleDelete(b(key(i)));
      for (int i = 1; i < n; i += 12) db.merge(b(key(i)), b("after-delete" + i));
      db.deleteRange(b(key(50)), b(key(70)));
      for (int i = 60; i < 65; i++) db.put(b(key(i)), b(val(i, "t3")));
      for (int i = 0; i < 20; i += 3) db.merge(b("mo" + i), b("y" + i));
      for (int i = 0; i < 20; i += 5) db.delete(b("mo" + i));
      flush(db);
      for (int i = 2; i < n; i += 10) db.merge(b(key(i)), b("t4m" + i));
      for (int i = 0; i < 20; i += 5) db.merge(b("mo" + i), b("z" + i));
      db.put(b(key(55)), b(val(55, "t4")));
      db.delete(b(key(0)));
      flush(db);
      for (Path p : ssts(dir)) {
        Files.copy(p, md.resolve(p.getFileName()), StandardCopyOption.REPLACE_EXISTING);
      }
      dumpLive(db, md.resolve("live.tsv"));
    } finally {
      deleteTree(dir);
    }
  }

  public static void main(String[] args) throws Exception {
    RocksDB.loadLibrary();
    Path out = Paths.get(args[0]);
    Files.createDirectories(out);
    IndexType bin = IndexType.kBinarySearch;
    DataBlockIndexType dbs = DataBlockIndexType.kDataBlockBinarySearch;
    List<Case> cases = List.of(
        new Case("v2-crc32c-none", 2, ChecksumType.kCRC32c, CompressionType.NO_COMPRESSION, bin, dbs),
        new Case("v2-xxhash-snappy", 2, ChecksumType.kxxHash, CompressionType.SNAPPY_COMPRESSION, bin, dbs),
        new Case("v3-xxhash64-lz4", 3, ChecksumType.kxxHash64, CompressionType.LZ4_COMPRESSION, bin, dbs),
        new Case("v3-crc32c-zlib", 3, ChecksumType.kCRC32c, CompressionType.ZLIB_COMPRESSION, bin, dbs),
        new Case("v4-xxh3-zstd", 4, ChecksumType.kXXH3, CompressionType.ZSTD_COMPRESSION, bin, dbs),
        new Case("v4-xxhash-bzip2", 4, ChecksumType.kxxHash, CompressionType.BZLIB2_COMPRESSION, bin, dbs),
        new Case("v5-xxh3-lz4", 5, ChecksumType.kXXH3, CompressionType.LZ4_COMPRESSION, bin, dbs),
        new Case("v5-crc32c-lz4hc", 5, ChecksumType.kCRC32c, CompressionType.LZ4HC_COMPRESSION, bin, dbs),
        new Case("v5-xxhash64-snappy", 5, ChecksumType.kxxHash64, CompressionType.SNAPPY_COMPRESSION, bin, dbs),
        new Case("v6-xxh3-zstd", 6, ChecksumType.kXXH3, CompressionType.ZSTD_COMPRESSION, bin, dbs),
        new Case("v6-crc32c-none", 6, ChecksumType.kCRC32c, CompressionType.NO_COMPRESSION, bin, dbs),
        new Case("v6-xxhash-lz4", 6, ChecksumType.kxxHash, CompressionType.LZ4_COMPRESSION, bin, dbs),
        new Case("v6-xxhash64-snappy", 6, ChecksumType.kxxHash64, CompressionType.SNAPPY_COMPRESSION, bin, dbs),
        new Case("v6-nochecksum-lz4", 6, ChecksumType.kNoChecksum, CompressionType.LZ4_COMPRESSION, bin, dbs),
        new Case("v5-xxh3-lz4-partitioned", 5, ChecksumType.kXXH3, CompressionType.LZ4_COMPRESSION,
            IndexType.kTwoLevelIndexSearch, dbs),
        new Case("v6-xxh3-none-partitioned", 6, ChecksumType.kXXH3, CompressionType.NO_COMPRESSION,
            IndexType.kTwoLevelIndexSearch, dbs),
        new Case("v4-crc32c-none-firstkey", 4, ChecksumType.kCRC32c, CompressionType.NO_COMPRESSION,
            IndexType.kBinarySearchWithFirstKey, dbs),
        new Case("v5-xxh3-lz4-hashindex", 5, ChecksumType.kXXH3, CompressionType.LZ4_COMPRESSION,
            IndexType.kHashSearch, dbs),
        new Case("v5-xxh3-lz4-datahash", 5, ChecksumType.kXXH3, CompressionType.LZ4_COMPRESSION, bin,
            DataBlockIndexType.kDataBlockBinaryAndHash));
    try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(out.resolve("tables.tsv")))) {
      w.println("# name\tformat_version\tchecksum\tcompression\tindex_type\tdata_block_index_type");
      for (Case c : cases) {
        single(c, out);
        w.println(c.name + "\t" + c.fv + "\t" + c.ck + "\t" + c.comp + "\t" + c.idx + "\t" + c.dbi);
      }
    }
    multi(out);
  }
}
