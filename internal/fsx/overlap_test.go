package fsx

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// overlapTree makes root/snap (a directory input with data/x.sst and
// MANIFEST.json), root/ds/ds.parquet (a file input) and a few links.
func overlapTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "snap", "data"), 0o755))
	must(os.WriteFile(filepath.Join(root, "snap", "MANIFEST.json"), []byte("{}"), 0o644))
	must(os.WriteFile(filepath.Join(root, "snap", "data", "x.sst"), []byte("x"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "ds"), 0o755))
	must(os.WriteFile(filepath.Join(root, "ds", "ds.parquet"), []byte("p"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "other", "deep"), 0o755))
	must(os.Symlink(filepath.Join(root, "snap"), filepath.Join(root, "alias")))
	must(os.Symlink("../../snap/data", filepath.Join(root, "other", "deep", "todata")))
	must(os.Symlink(filepath.Join(root, "snap", "new"), filepath.Join(root, "dangling")))
	must(os.Link(filepath.Join(root, "snap", "MANIFEST.json"), filepath.Join(root, "other", "hardlink.json")))
	return root
}

func TestCheckDisjoint(t *testing.T) {
	root := overlapTree(t)
	snap, ds := filepath.Join(root, "snap"), filepath.Join(root, "ds", "ds.parquet")
	for _, c := range []struct {
		target, input string
		want          string // "" accepted, else a word of the refusal
	}{
		{"snap", snap, "is the input"},
		{"snap/", snap, "is the input"},
		{"snap/.", snap, "is the input"},
		{"other/../snap", snap, "is the input"},
		{"alias", snap, "is the input"},
		{"alias/", snap, "is the input"},
		{"snap", "alias", "is the input"},
		{"snap/x", snap, "lies inside"},
		{"alias/x", snap, "lies inside"},
		{"snap/MANIFEST.json", snap, "lies inside"},
		{"snap/data/x.sst", snap, "lies inside"},
		{"snap/data/new/deeper/x.parquet", snap, "lies inside"},
		// The kernel resolves ".." after a link from the link's target:
		// other/deep/todata/.. is snap, not other/deep.
		{"other/deep/todata/../new", snap, "lies inside"},
		{"other/deep/todata/..", snap, "is the input"},
		// A write through a dangling link creates its target.
		{"dangling", snap, "lies inside"},
		// A hard link is the same file.
		{"other/hardlink.json", filepath.Join(snap, "MANIFEST.json"), "is the input"},
		{".", snap, "holds the input"},
		{"alias/..", snap, "holds the input"},
		{"/", snap, "holds the input"},
		{"ds", ds, "holds the input"},
		{"ds/ds.parquet", ds, "is the input"},
		{"ds/ds.parquet/x", ds, "lies inside"},
		{"snap2", snap, ""},
		{"snapx/new", snap, ""},
		{"other/deep/out", snap, ""},
		{"ds/ds.arrow", ds, ""},
		{"other", ds, ""},
	} {
		t.Run(c.target+" vs "+c.input, func(t *testing.T) {
			t.Chdir(root)
			err := CheckDisjoint(c.target, "", c.input)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
			case err == nil:
				t.Fatalf("accepted, want refused (%s)", c.want)
			case !errors.Is(err, snapshotfmt.ErrRefused) || !errors.Is(err, ErrOverlap):
				t.Fatalf("%v does not wrap ErrRefused and ErrOverlap", err)
			case !strings.Contains(err.Error(), c.want):
				t.Fatalf("%v: want %q", err, c.want)
			}
		})
	}
}

func TestCheckDisjointSeveralInputs(t *testing.T) {
	root := overlapTree(t)
	snap, ds := filepath.Join(root, "snap"), filepath.Join(root, "ds", "ds.parquet")
	if err := CheckDisjoint(filepath.Join(root, "out"), snap, ds); err != nil {
		t.Fatal(err)
	}
	if err := CheckDisjoint(filepath.Join(root, "ds"), snap, ds); !errors.Is(err, ErrOverlap) {
		t.Fatalf("second input not checked: %v", err)
	}
}

func TestCheckOutside(t *testing.T) {
	root := overlapTree(t)
	snap := filepath.Join(root, "snap")
	for _, c := range []struct {
		dir    string
		refuse bool
	}{
		{root, false}, // a scratch directory may hold the input
		{filepath.Join(root, "other"), false},
		{snap, true},
		{filepath.Join(snap, "data"), true},
		{filepath.Join(root, "alias", "data"), true},
		{filepath.Join(root, "other", "deep", "todata"), true},
	} {
		err := CheckOutside(c.dir, snap)
		if c.refuse != (err != nil) || (err != nil && !errors.Is(err, snapshotfmt.ErrRefused)) {
			t.Errorf("CheckOutside(%s): %v, want refused %v", c.dir, err, c.refuse)
		}
	}
}

func TestResolveLoop(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink("b", filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(filepath.Join(root, "a", "x")); !errors.Is(err, unix.ELOOP) {
		t.Fatalf("a link loop: %v, want ELOOP", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/mnt/a\040b\134c`); got != `/mnt/a b\c` {
		t.Fatalf("got %q", got)
	}
}

// TestCheckDisjointBindMount runs itself again in a private mount
// namespace (unshare -m, as root) and bind-mounts a subdirectory: a second
// spelling of the input that shares no ancestor with it.
func TestCheckDisjointBindMount(t *testing.T) {
	if dir := os.Getenv("FSX_BIND_CHILD"); dir != "" {
		bindChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a bind mount")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	root := t.TempDir()
	for _, d := range []string{"data/snap/data", "mnt/b"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0], "-test.run=^TestCheckDisjointBindMount$", "-test.v")
	cmd.Env = append(os.Environ(), "FSX_BIND_CHILD="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") {
			t.Skipf("no mount namespace here: %s", out)
		}
		t.Fatalf("in a mount namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bind checks ran") {
		t.Fatalf("the child did not run the checks:\n%s", out)
	}
}

func bindChild(t *testing.T, root string) {
	real := filepath.Join(root, "data", "snap")
	alias := filepath.Join(root, "mnt", "b")
	if err := unix.Mount(real, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	defer unix.Unmount(alias, 0)
	for _, c := range []struct{ target, input, want string }{
		{alias, real, "is the input"},
		{real, alias, "is the input"},
		{filepath.Join(alias, "x"), real, "lies inside"},
		{filepath.Join(real, "data", "x"), alias, "lies inside"},
		// The parent of the source, with the source given through the
		// mount: no ancestor of the alias is the parent; only the mount
		// table tells.
		{filepath.Join(root, "data"), alias, "holds the input"},
		{filepath.Join(root, "data"), filepath.Join(alias, "data"), "holds the input"},
		// A mount below the target shows the input.
		{filepath.Join(root, "mnt"), real, "holds the input"},
		{filepath.Join(root, "data", "other"), alias, ""},
	} {
		err := CheckDisjoint(c.target, c.input)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s vs %s: refused: %v", c.target, c.input, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s vs %s: %v, want %q", c.target, c.input, err, c.want)
		}
	}
	t.Log("bind checks ran")
}
