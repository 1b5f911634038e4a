package main

import (
	"errors"
	"fmt"

	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// widthAdvice is what a command says when w workers cannot own the state of
// the snapshot at src with n buckets: copy-pasteable commands on the real
// path, the count from the one rule (plan.SuggestBuckets). next, when set,
// is the command to run on the rewritten snapshot, with %s for its path.
func widthAdvice(src string, n, w int, next string) string {
	m := plan.SuggestBuckets(n, w)
	target := plan.SuggestTarget(src, m)
	s := fmt.Sprintf("raise the count (a split, with %dx headroom): `rebucket rewrite %s --buckets %d --out %s`",
		snapshotfmt.DefaultHeadroom, plan.ShellQuote(src), m, plan.ShellQuote(target))
	if next != "" {
		s += fmt.Sprintf(", then `%s`", fmt.Sprintf(next, plan.ShellQuote(target)))
	}
	return s + fmt.Sprintf("; `rebucket plan --recommend --peak-width %d` weighs other counts", w)
}

// loadRefusal rewrites the library's refusal of a width above the bucket
// count into advice with the user's own paths and flags.
func loadRefusal(err error, src, into string, w int) error {
	var we *snapshotfmt.WidthError
	if !errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("%w: width %d is above the bucket count %d of %s: at most %d workers can own state; %s; or start anyway: `rebucket load %s --width %d --into %s --on-excess cap` (%d workers) or `--on-excess idle` (%d of them own nothing)",
		snapshotfmt.ErrRefused, w, we.Buckets, src, we.Buckets,
		widthAdvice(src, we.Buckets, w, fmt.Sprintf("rebucket load %%s --width %d --into %s", w, plan.ShellQuote(into))),
		plan.ShellQuote(src), w, plan.ShellQuote(into), we.Buckets, w-we.Buckets)
}
