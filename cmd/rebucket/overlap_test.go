package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/writer"
)

// overlapFixture is root/snap (a snapshot), root/ds (its export: ds.parquet
// and ds.workers.parquet), root/alias -> snap and root/dsalias -> ds.
func overlapFixture(t *testing.T) (root, snap, ds string) {
	t.Helper()
	root = t.TempDir()
	snap = filepath.Join(root, "snap")
	if _, err := fixtures.Generate(context.Background(), snap, fixtures.Spec{Buckets: 8, Width: 2, Keys: 200}, writer.Options{FileSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	ds = filepath.Join(root, "ds")
	if err := os.Mkdir(ds, 0o750); err != nil {
		t.Fatal(err)
	}
	if out, code := runRoot(t, "export", snap, "--out", filepath.Join(ds, "ds.parquet")); code != exitOK {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	for link, to := range map[string]string{"alias": "snap", "dsalias": "ds"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing else may lie beside them: the tree hash covers the root.
	for _, e := range mustReadDir(t, root) {
		if strings.HasSuffix(e, ".rebucket.lock") {
			os.Remove(filepath.Join(root, e))
		}
	}
	return root, snap, ds
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// Every command that writes, at every spelling of "the target is, holds or
// lies inside an input", with and without --force: refused with exit 3
// before anything is written, the inputs (and everything beside them)
// unchanged.
func TestWritersRefuseOverlap(t *testing.T) {
	root, snap, ds := overlapFixture(t)
	dataFile := ""
	for _, e := range mustReadDir(t, filepath.Join(snap, "data")) {
		dataFile = filepath.Join(snap, "data", e)
		break
	}
	if dataFile == "" {
		t.Fatal("the fixture has no data file")
	}
	pq := filepath.Join(ds, "ds.parquet")
	other := filepath.Join(t.TempDir(), "b") // split's second output, outside root

	// Spellings of a target that is, holds or lies inside the snapshot.
	snapTargets := map[string]string{
		"the snapshot":                    snap,
		"the snapshot/.":                  snap + "/.",
		"a second spelling (x/../snap)":   filepath.Join(root, "ds") + "/../snap",
		"a symbolic link to it":           filepath.Join(root, "alias"),
		"its parent":                      root,
		"its parent via the link (..)":    filepath.Join(root, "alias") + "/..",
		"a new directory inside it":       filepath.Join(snap, "x"),
		"a new directory inside via link": filepath.Join(root, "alias", "x"),
		"its data directory":              filepath.Join(snap, "data"),
		"its manifest":                    filepath.Join(snap, "MANIFEST.json"),
		"a data file":                     dataFile,
		"a new file inside data/":         filepath.Join(snap, "data", "x.parquet"),
	}
	// Of a target that is, holds or lies inside the dataset being imported.
	dsTargets := map[string]string{
		"the dataset file":            pq,
		"its directory":               ds,
		"its directory via a link":    filepath.Join(root, "dsalias"),
		"the root":                    root,
		"its per-worker sibling":      filepath.Join(ds, "ds.workers.parquet"),
		"a new directory in the file": filepath.Join(pq, "x"),
	}
	// Importing the directory, a new directory in it lies inside the input.
	dsDirTargets := map[string]string{"a new directory inside it": filepath.Join(ds, "snap")}
	for what, tg := range dsTargets {
		dsDirTargets[what] = tg
	}
	// A scratch directory that is or lies inside an input (one that holds
	// an input is fine: see the end).
	snapTmp := map[string]string{}
	for what, tg := range snapTargets {
		if tg != root && !strings.HasSuffix(tg, "/..") {
			snapTmp[what] = tg
		}
	}
	dsTmp := map[string]string{"the dataset file": pq, "a new directory in the file": filepath.Join(pq, "x")}
	commands := []struct {
		name    string
		targets map[string]string
		args    func(target string) []string
	}{
		{"rewrite", snapTargets, func(tg string) []string { return []string{"rewrite", snap, "--buckets", "4", "--out", tg} }},
		{"rewrite via link", snapTargets, func(tg string) []string {
			return []string{"rewrite", filepath.Join(root, "alias"), "--buckets", "4", "--out", tg}
		}},
		{"split A", snapTargets, func(tg string) []string {
			return []string{"split", snap, "--out", tg, "--out", other, "--by", "buckets=0-3"}
		}},
		{"split B", snapTargets, func(tg string) []string {
			return []string{"split", snap, "--out", other, "--out", tg, "--by", "buckets=0-3"}
		}},
		{"export", snapTargets, func(tg string) []string { return []string{"export", snap, "--out", tg} }},
		{"export arrow", snapTargets, func(tg string) []string { return []string{"export", snap, "--format", "arrow", "--out", tg} }},
		{"export partitioned", snapTargets, func(tg string) []string {
			return []string{"export", snap, "--partition-by", "bucket", "--out", tg}
		}},
		{"load", snapTargets, func(tg string) []string { return []string{"load", snap, "--width", "2", "--into", tg} }},
		{"load via link", snapTargets, func(tg string) []string {
			return []string{"load", filepath.Join(root, "alias"), "--width", "2", "--into", tg}
		}},
		{"import file", dsTargets, func(tg string) []string { return []string{"import", pq, "--buckets", "4", "--out", tg} }},
		{"import dir", dsDirTargets, func(tg string) []string { return []string{"import", ds, "--buckets", "4", "--out", tg} }},
		// --tmp inside an input: spill files would be written there.
		{"rewrite --tmp", snapTmp, func(tg string) []string {
			return []string{"rewrite", snap, "--buckets", "3", "--memory", "1MiB", "--out", filepath.Join(t.TempDir(), "o"), "--tmp", tg}
		}},
		{"import --tmp", dsTmp, func(tg string) []string {
			return []string{"import", pq, "--buckets", "4", "--memory", "1MiB", "--out", filepath.Join(t.TempDir(), "o"), "--tmp", tg}
		}},
	}
	before := dirHash(t, root)
	runs := 0
	defer func() { t.Logf("%d runs refused", runs) }()
	for _, c := range commands {
		for what, tg := range c.targets {
			for _, force := range []bool{false, true} {
				args := c.args(tg)
				if force {
					args = append(args, "--force")
				}
				out, code := runRoot(t, args...)
				runs++
				if code != exitRefused {
					t.Errorf("%s, target %s (%s), --force %v: exit %d, want %d\n%s", c.name, what, tg, force, code, exitRefused, out)
				}
				if h := dirHash(t, root); h != before {
					t.Fatalf("%s, target %s (%s), --force %v: the inputs' tree changed (exit %d)\n%s", c.name, what, tg, force, code, out)
				}
			}
		}
	}
	// A scratch directory may hold an input: the default one, the target's
	// parent, often does. Only the spill directory is created and removed.
	if out, code := runRoot(t, "rewrite", snap, "--buckets", "3", "--memory", "1MiB", "--out", filepath.Join(t.TempDir(), "o"), "--tmp", root); code != exitOK {
		t.Errorf("--tmp holding the source: exit %d\n%s", code, out)
	}
	if h := dirHash(t, root); h != before {
		t.Fatalf("--tmp holding the source: the tree changed")
	}
}

// --force replaces only what rebucket itself could have written: a regular
// file, or a directory holding an earlier output of the same kind. A FIFO,
// a device node, a symbolic link or someone's directory is refused (exit
// 3) and left as it was.
func TestForceReplacesOnlyOwnOutput(t *testing.T) {
	root, snap, ds := overlapFixture(t)
	pq := filepath.Join(ds, "ds.parquet")
	out := t.TempDir()
	fifo := filepath.Join(out, "fifo.parquet")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	devnull := filepath.Join(out, "devnull.parquet")
	if err := os.Symlink("/dev/null", devnull); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(out, "home")
	os.Mkdir(home, 0o750)
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine"), 0o600)
	// A FIFO where the per-worker sibling goes.
	sib := filepath.Join(out, "sib.parquet")
	if err := syscall.Mkfifo(filepath.Join(out, "sib.workers.parquet"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := [][]string{
		{"export", snap, "--out", fifo, "--force"},
		{"export", snap, "--out", devnull, "--force"},
		{"export", snap, "--out", sib, "--force"},
		{"export", snap, "--partition-by", "bucket", "--out", home, "--force"},
		{"rewrite", snap, "--buckets", "4", "--out", home, "--force"},
		{"split", snap, "--out", home, "--out", filepath.Join(out, "b"), "--by", "buckets=0-3", "--force"},
		{"import", pq, "--buckets", "4", "--out", home, "--force"},
		{"load", snap, "--width", "2", "--into", home, "--force"},
		{"generate", "--out", home, "--force"},
	}
	if os.Geteuid() == 0 {
		// As root, export --out /dev/null --force once made /dev/null a
		// regular file; a device node of our own shows it safely.
		dev := filepath.Join(out, "null.parquet")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err == nil {
			refused = append(refused, []string{"export", snap, "--out", dev, "--force"})
		}
	}
	before, rootBefore := dirHash(t, out), dirHash(t, root)
	for _, args := range refused {
		if o, code := runRoot(t, args...); code != exitRefused || !strings.Contains(o, "replaces only") {
			t.Errorf("%v: exit %d, want %d naming what --force replaces\n%s", args, code, exitRefused, o)
		}
		if dirHash(t, out) != before || dirHash(t, root) != rootBefore {
			t.Fatalf("%v: a refused target changed", args)
		}
	}
	// An earlier output of the same kind is replaced.
	part := filepath.Join(out, "part")
	for _, args := range [][]string{
		{"export", snap, "--partition-by", "bucket", "--out", part},
		{"export", snap, "--partition-by", "bucket", "--out", part, "--force"},
		{"export", snap, "--partition-by", "state", "--format", "arrow", "--out", filepath.Join(out, "bystate")},
		{"export", snap, "--partition-by", "state", "--format", "arrow", "--out", filepath.Join(out, "bystate"), "--force"},
		{"load", snap, "--width", "2", "--into", filepath.Join(out, "load")},
		{"load", snap, "--width", "2", "--into", filepath.Join(out, "load"), "--force"},
		{"export", snap, "--out", filepath.Join(out, "x.parquet")},
		{"export", snap, "--out", filepath.Join(out, "x.parquet"), "--force"},
		{"generate", "--out", filepath.Join(out, "gen")},
		{"rewrite", snap, "--buckets", "4", "--out", filepath.Join(out, "gen"), "--force"},
	} {
		if o, code := runRoot(t, args...); code != exitOK {
			t.Errorf("%v: exit %d\n%s", args, code, o)
		}
	}
	// Not of the same kind: a bucket-partitioned export is not replaced by
	// a state-partitioned one, nor a load directory by a snapshot.
	for _, args := range [][]string{
		{"export", snap, "--partition-by", "state", "--out", part, "--force"},
		{"export", snap, "--partition-by", "bucket", "--format", "arrow", "--out", part, "--force"},
		{"rewrite", snap, "--buckets", "4", "--out", filepath.Join(out, "load"), "--force"},
		{"load", snap, "--width", "2", "--into", filepath.Join(out, "gen"), "--force"},
	} {
		if o, code := runRoot(t, args...); code != exitRefused {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitRefused, o)
		}
	}
}
