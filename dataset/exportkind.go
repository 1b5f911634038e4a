package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rebucket/rebucket/writer"
)

// exportKind is what export --force may replace with a partitioned export:
// an earlier export partitioned the same way in the same format (the Hive
// directories of partitionBy holding part files, and _rebucket/ with the
// per-worker table, or _worker_state.EXT of older exports),
// nothing else.
func exportKind(partitionBy string, f Format) writer.Kind {
	name := fmt.Sprintf("%s export partitioned by %s", f, partitionBy)
	levels := []string{"bucket="}
	if partitionBy == "state" {
		levels = []string{"step=", "state="}
	}
	return writer.Kind{Name: name, Check: func(dir string) error {
		return checkExportDir(dir, levels, f.Ext())
	}}
}

func checkExportDir(dir string, levels []string, ext string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case len(levels) > 0 && e.Type().IsDir() && strings.HasPrefix(e.Name(), levels[0]):
			if err := checkExportDir(p, levels[1:], ext); err != nil {
				return err
			}
		case len(levels) == 0 && e.Type().IsRegular() && strings.HasPrefix(e.Name(), "part-") && strings.HasSuffix(e.Name(), ext):
		// _worker_state.EXT: where exports before _rebucket/ put it.
		case e.Type().IsRegular() && (e.Name() == "_worker_state"+ext || e.Name() == writer.MarkerName):
		case e.Type().IsDir() && e.Name() == WorkerStateDir && checkWorkerStateDir(p) == nil:
		default:
			return fmt.Errorf("it holds %s, which no such export writes", p)
		}
	}
	return nil
}

// checkWorkerStateDir accepts a _rebucket directory holding only per-worker
// state tables.
func checkWorkerStateDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "worker_state.") {
			return fmt.Errorf("it holds %s, which no export writes", filepath.Join(dir, e.Name()))
		}
	}
	return nil
}
