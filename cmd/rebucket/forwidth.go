package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rebucket/rebucket/plan"
)

// parseForWidths reads rewrite --for-width: widths, or "none" (cut only
// at the width at write). No flag gives nil: the default widths.
func parseForWidths(vals []string) ([]int, error) {
	if vals == nil {
		return nil, nil
	}
	out := []int{}
	for _, v := range vals {
		v = strings.TrimSpace(v)
		if v == "none" {
			continue
		}
		w, err := strconv.Atoi(v)
		if err != nil {
			return nil, usagef(fmt.Errorf("--for-width %q: want widths such as 4,40 (or none)", v))
		}
		out = append(out, w)
	}
	ws, err := plan.CheckCutWidths(out)
	if err != nil {
		return nil, usagef(err)
	}
	return ws, nil
}
