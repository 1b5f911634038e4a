package progress

import "testing"

// startOnly is a Reporter that knows nothing of units.
type startOnly struct{ what []string }

func (s *startOnly) Start(_ int64, what string) { s.what = append(s.what, what) }
func (s *startOnly) Add(int64)                  {}
func (s *startOnly) Finish()                    {}

func TestStartUnit(t *testing.T) {
	var s startOnly
	StartUnit(&s, 5, "build", Workers)
	if len(s.what) != 1 || s.what[0] != "build" {
		t.Errorf("a Reporter without units did not see the phase: %v", s.what)
	}
	var r Recorder
	StartUnit(&r, 5, "build", Workers)
	r.Add(2)
	r.Add(3)
	r.Start(10, "read") // the next phase ends the last
	r.Add(10)
	r.Finish()
	p := r.Phases()
	if len(p) != 2 || p[0] != (Phase{What: "build", Total: 5, Unit: Workers, Done: 5, Finished: true}) ||
		p[1] != (Phase{What: "read", Total: 10, Unit: Bytes, Done: 10, Finished: true}) {
		t.Errorf("phases %+v", p)
	}
	StartUnit(OrNop(nil), 1, "x", Rows) // Nop takes units too
}
