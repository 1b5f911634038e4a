package main

import "github.com/rebucket/rebucket/internal/fsx"

// refuseOverlap is every writing command's first check, before anything is
// written: no output is, holds or lies inside an input (whatever the
// spelling: symbolic links, "..", bind mounts), and no scratch directory
// (--tmp) is or lies inside one. A refusal is ErrRefused (exit 3).
func refuseOverlap(outputs, scratch []string, inputs ...string) error {
	for _, o := range outputs {
		if err := fsx.CheckDisjoint(o, inputs...); err != nil {
			return err
		}
	}
	for _, d := range scratch {
		if err := fsx.CheckOutside(d, inputs...); err != nil {
			return err
		}
	}
	return nil
}
