package snapshotfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// Fuzz tests of every decoder. The seed corpus (testdata/valid.json, its
// keys, and the FORMAT.md vectors) runs in every `go test`; `go test -fuzz`
// explores further. Decoders must never panic, must fail only with
// ErrCorrupt (or the specific sentinel), and must never allocate beyond a
// bound set by the input's size.

func FuzzDecodeManifest(f *testing.F) {
	valid := validManifest(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(bytes.Replace(valid, []byte(`"version": 1`), []byte(`"version": 2`), 1))
	f.Add(bytes.Replace(valid, []byte(`"tool":`), []byte(`"x": null, "tool":`), 1))
	f.Add(bytes.Replace(valid, []byte(`"tool":`), []byte(`"tool": "x", "tool":`), 1))
	f.Add(bytes.Replace(valid, []byte(`"tool":`), []byte(`"Tool":`), 1))
	f.Add(bytes.ReplaceAll(valid, []byte("\n "), []byte("\n")))
	f.Add([]byte(`{"format":"rebucket-snapshot","version":1}`))
	f.Add([]byte(`null`))
	// cut_widths: a list, an empty one (not canonical), a bad width.
	f.Add(bytes.Replace(valid, []byte(`"width_at_write": `), []byte("\"cut_widths\": [\n  1,\n  2\n ],\n \"width_at_write\": "), 1))
	f.Add(bytes.Replace(valid, []byte(`"width_at_write": `), []byte(`"cut_widths": [], "width_at_write": `), 1))
	f.Add(bytes.Replace(valid, []byte(`"width_at_write": `), []byte(`"cut_widths": [0], "width_at_write": `), 1))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		// Anything accepted is valid and re-encodes to an accepted manifest.
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted a manifest Validate rejects: %v", err)
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(enc); err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	var m Manifest
	if err := json.Unmarshal(validManifest(f), &m); err != nil {
		f.Fatal(err)
	}
	for _, df := range m.Files {
		f.Add(df.SmallestKey())
		f.Add(df.LargestKey())
	}
	f.Add([]byte{})
	f.Add(EncodeKey(65535, 65535, []byte{0, 0xff}, nil))
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, enc []byte) {
		dk, err := DecodeKey(enc)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		if len(dk.Key)+len(dk.SubKey)+KeyHeaderLen != len(enc) {
			t.Fatalf("decoded fields do not add up to the input")
		}
		if again := EncodeKey(dk.Bucket, dk.State, dk.Key, dk.SubKey); !bytes.Equal(again, enc) {
			t.Fatalf("re-encode gives %x, want %x", again, enc)
		}
		if b, ok := KeyBucket(enc); !ok || b != dk.Bucket {
			t.Fatalf("KeyBucket disagrees")
		}
	})
}

func FuzzDecodeWorkerItems(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeWorkerItems([][]byte{[]byte("events-0:17"), {}, []byte("x")}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := DecodeWorkerItems(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		// Items alias the input, and each costs at least its 4-byte length,
		// so the decoded slice is bounded by the input size.
		if 4*len(items) > len(data) {
			t.Fatalf("%d items from %d bytes", len(items), len(data))
		}
		if !bytes.Equal(EncodeWorkerItems(items), data) {
			t.Fatalf("re-encode differs")
		}
	})
}
