package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rebucket/rebucket/writer"
)

// loadKind is what load --force may replace: an earlier load's directory,
// LOAD.json (a regular file naming its snapshot) and worker-NNNN
// directories, nothing else.
var loadKind = writer.Kind{Name: "load directory", Check: checkLoadDir}

func checkLoadDir(dir string) error {
	rec := filepath.Join(dir, loadRecordName)
	if err := writer.RegularFile(rec); err != nil {
		return err
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		return err
	}
	var r struct {
		Snapshot string `json:"snapshot"`
	}
	if json.Unmarshal(data, &r) != nil || r.Snapshot == "" {
		return fmt.Errorf("%s is not a load record", rec)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		switch {
		case e.Name() == loadRecordName, e.Name() == writer.MarkerName:
		case e.IsDir() && strings.HasPrefix(e.Name(), "worker-"):
		default:
			return fmt.Errorf("%s holds %s, which no load writes", dir, e.Name())
		}
	}
	return nil
}
