package fsx

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// ErrOverlap marks an output (or scratch directory) that is an input, lies
// inside one, or holds one: writing it, or replacing it under --force,
// would change or delete what the run reads. It wraps snapshotfmt.ErrRefused.
var ErrOverlap = fmt.Errorf("%w: output overlaps an input", snapshotfmt.ErrRefused)

// CheckDisjoint refuses a target that is one of inputs, lies inside one, or
// contains one. Every command that writes calls it (for each of its
// outputs) before it writes anything; inputs may be files or directories.
//
// Paths are compared as the kernel will resolve them, not as spelled:
// symbolic links and ".." are resolved component by component (also in
// the part of the target that does not exist yet), and device and inode
// numbers are compared along both ancestries, so a second spelling, a hard
// link or a bind mount of an input is found too. A bind mount whose source
// is a subdirectory is mapped back through the mount table, so a target
// that contains an input reached only through such a mount is found as
// well. Empty entries of inputs are ignored.
func CheckDisjoint(target string, inputs ...string) error {
	return checkOverlap(target, inputs, true)
}

// CheckOutside refuses a directory that is one of inputs or lies inside
// one. It is the check for scratch directories (--tmp): the run creates
// and removes only its own entries in them, so one may hold an input (the
// default, the target's parent, often does), but nothing may be written
// inside an input.
func CheckOutside(dir string, inputs ...string) error {
	return checkOverlap(dir, inputs, false)
}

func checkOverlap(target string, inputs []string, refuseContains bool) error {
	if target == "" {
		return nil
	}
	t, err := newPlace(target)
	if err != nil {
		return err
	}
	var mounts []mount
	for _, in := range inputs {
		if in == "" {
			continue
		}
		i, err := newPlace(in)
		if err != nil {
			return err
		}
		rel := t.relation(i)
		if rel == unrelated {
			// Bind mounts of subdirectories hide containment from both
			// ancestries; the mount table tells where each path lies in
			// its filesystem.
			if mounts == nil {
				mounts = readMounts()
			}
			rel = t.relationInFS(i, mounts)
		}
		switch rel {
		case same:
			return fmt.Errorf("%w: %s is the input %s; choose an output outside every input", ErrOverlap, target, in)
		case inside:
			return fmt.Errorf("%w: %s lies inside the input %s; inputs are never written, choose an output outside it", ErrOverlap, target, in)
		case contains:
			if refuseContains {
				return fmt.Errorf("%w: %s holds the input %s; replacing it would delete the input, choose an output outside it", ErrOverlap, target, in)
			}
		}
	}
	return nil
}

type relation int

const (
	unrelated relation = iota
	same
	inside   // the target lies inside the input
	contains // the target contains the input
)

// place is a path resolved as the kernel resolves it, with the identities
// (device, inode) of it and of its existing ancestors.
type place struct {
	path string // absolute, symbolic links and ".." resolved
	// ids[k] is the identity of the k-th existing path from the deepest
	// existing one up to "/"; exists says whether path itself exists.
	ids    []fileID
	exists bool
}

type fileID struct{ dev, ino uint64 }

func newPlace(p string) (place, error) {
	r, err := resolve(p)
	if err != nil {
		return place{}, err
	}
	pl := place{path: r}
	for cur, first := r, true; ; first = false {
		var st unix.Stat_t
		if err := unix.Stat(cur, &st); err == nil {
			if first {
				pl.exists = true
			}
			pl.ids = append(pl.ids, fileID{uint64(st.Dev), st.Ino})
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		cur = parent
	}
	return pl, nil
}

// id is the identity of the path itself (ok false when it does not exist).
func (p place) id() (fileID, bool) {
	if !p.exists {
		return fileID{}, false
	}
	return p.ids[0], true
}

func (t place) relation(in place) relation {
	sep := string(filepath.Separator)
	switch {
	case t.path == in.path:
		return same
	case strings.HasPrefix(t.path, strings.TrimSuffix(in.path, sep)+sep):
		return inside
	case strings.HasPrefix(in.path, strings.TrimSuffix(t.path, sep)+sep):
		return contains
	}
	if iid, ok := in.id(); ok {
		for k, a := range t.ids {
			if a == iid {
				if k == 0 && t.exists {
					return same
				}
				return inside
			}
		}
	}
	if tid, ok := t.id(); ok {
		for _, a := range in.ids {
			if a == tid {
				return contains
			}
		}
	}
	return unrelated
}

// relationInFS compares where the two paths lie inside their filesystems,
// through the mount table: two mounts of one filesystem (bind mounts) give
// one place two spellings that share no ancestor.
func (t place) relationInFS(in place, mounts []mount) relation {
	tm, tp, ok1 := fsPath(t.path, mounts)
	im, ip, ok2 := fsPath(in.path, mounts)
	if !ok1 || !ok2 {
		return unrelated
	}
	if tm == im {
		if r := (place{path: tp}).relation(place{path: ip}); r != unrelated {
			return r
		}
	}
	// A mount below the target that shows the input (or a directory
	// holding it): removing the target would descend into it.
	for _, m := range mounts {
		if m.dev == im && m.mountPoint != t.path && within(m.mountPoint, t.path) && within(ip, m.root) {
			return contains
		}
	}
	return unrelated
}

type mount struct {
	dev        string // major:minor of the filesystem
	root       string // the directory of the filesystem mounted here
	mountPoint string
}

// readMounts reads this process's mount table (nil where there is none).
func readMounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []mount{}
	}
	defer f.Close()
	ms := []mount{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mount-point options ... - type source
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		ms = append(ms, mount{dev: fs[2], root: unescapeMount(fs[3]), mountPoint: unescapeMount(fs[4])})
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if v, ok := octal3(s[i+1:]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal3(s string) (byte, bool) {
	if len(s) < 3 {
		return 0, false
	}
	v := 0
	for _, c := range s[:3] {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}

// fsPath maps an absolute resolved path to its filesystem and its path
// inside it, through the last-mounted of the deepest mounts holding it.
func fsPath(p string, mounts []mount) (dev, inFS string, ok bool) {
	best := -1
	for k, m := range mounts {
		if !within(p, m.mountPoint) {
			continue
		}
		if best < 0 || len(m.mountPoint) >= len(mounts[best].mountPoint) {
			best = k
		}
	}
	if best < 0 {
		return "", "", false
	}
	m := mounts[best]
	rest := strings.TrimPrefix(p, m.mountPoint)
	return m.dev, filepath.Join(m.root, "/"+rest), true
}

func within(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

// maxLinks bounds the symbolic links one resolution follows (as the
// kernel's ELOOP does).
const maxLinks = 255

// resolve returns the absolute path p names once symbolic links and ".."
// are resolved as the kernel resolves them: a ".." after a symbolic link
// goes to the parent of the link's target, not of the link. Components that
// do not exist are taken as spelled; a dangling link is followed to where a
// write would create its target.
func resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		p = wd + "/" + p
	}
	todo := strings.Split(p, "/")
	cur := "/"
	missing := false // once a component is missing, nothing below exists
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
			missing = true
			cur = next
		case err != nil:
			return "", fmt.Errorf("resolve %s: %w", p, err)
		case fi.Mode()&os.ModeSymlink != 0:
			links++
			if links > maxLinks {
				return "", fmt.Errorf("resolve %s: %w", p, unix.ELOOP)
			}
			dst, err := os.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("resolve %s: %w", p, err)
			}
			if filepath.IsAbs(dst) {
				cur = "/"
			}
			todo = append(strings.Split(dst, "/"), todo...)
		default:
			cur = next
		}
	}
	return cur, nil
}
