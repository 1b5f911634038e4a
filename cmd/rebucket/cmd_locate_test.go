package main

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func TestLocate(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 200})
	key := fixtures.Key(7)
	part, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 8)
	b := int(part.Bucket(key))
	for _, tc := range []struct {
		args  []string
		width int
	}{
		{[]string{"locate", src, string(key)}, 4},
		{[]string{"locate", src, hex.EncodeToString(key), "--key-format", "hex", "--width", "3"}, 3},
		{[]string{"locate", src, string(key), "--width", "12"}, 12},
	} {
		out, code := runRoot(t, append([]string{"--json"}, tc.args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, code, out)
		}
		var rep locateReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Hash != snapshotfmt.HashKey(key) || int(rep.Bucket) != b || rep.Owner != snapshotfmt.OwnerOf(b, tc.width, 8) || rep.Width != tc.width {
			t.Errorf("%v: %+v", tc.args, rep)
		}
		// A value, 4 map sub-keys and a list: 6 entries.
		if len(rep.Entries) != 6 || rep.EntryCounts["sessions/open"] != 4 || rep.EntryCounts["count/per_user"] != 1 {
			t.Errorf("%v: entries %v", tc.args, rep.EntryCounts)
		}
		for _, e := range rep.Entries {
			if e.Kind == "map" && !strings.HasPrefix(e.SubKey, "s00000") {
				t.Errorf("sub-key %q", e.SubKey)
			}
		}
	}
	out, code := runRoot(t, "locate", src, string(key))
	if code != exitOK || !strings.Contains(out, "sessions/open (map): 4 entries") || !strings.Contains(out, "owner    worker") {
		t.Errorf("human: exit %d:\n%s", code, out)
	}
	// A key that is not there: its key prefix is another key's prefix.
	out, code = runRoot(t, "locate", src, string(key[:len(key)-1]))
	if code != exitOK || !strings.Contains(out, "not in this snapshot") {
		t.Errorf("absent key: exit %d:\n%s", code, out)
	}
	if out, code := runRoot(t, "locate", src, "zz", "--key-format", "hex"); code != exitUsage {
		t.Errorf("bad hex: exit %d: %s", code, out)
	}
}
