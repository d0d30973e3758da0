package store

import (
	"strings"
	"testing"
)

// BenchmarkCommitArgs measures building the script call of one fused commit of the
// benchmark's flow (five no-op steps, 256 bytes of state) in Go, without Redis: the
// keys and arguments a worker hands go-redis for every run.
func BenchmarkCommitArgs(b *testing.B) {
	state := []byte(`{"pad":"` + strings.Repeat("x", 244) + `"}`)
	ev := []byte(`{"duration_ms":0.004,"kind":"step","status":"done"}`)
	act := Activation{Flow: "bench", Node: "in", ID: "1700000000000-0", Run: "r06h3bedabt2wdpqb0pg5p", Version: "c35b654d3dda6928b27d63c7242ae40b06e247886f0b1a8c564b7fb661bea3a3", Ckpt: "1700000000000-1", Depth: 1, Deliveries: 1}
	c := &Commit{Act: act, Consumer: "host-1-1", MaxSteps: 50, KeepLast: 0}
	for i, n := range []string{"in", "n1", "n2", "n3", "out"} {
		s := CommitStep{Node: n, State: state, Event: ev, Checkpoint: Checkpoint{Node: n, Kind: "step", Attempt: 1, Worker: "host-1-1", Output: []byte(`{}`)}}
		if i == 4 {
			s.Final, s.Checkpoint.Output = []byte("null"), []byte("null")
		}
		c.Steps = append(c.Steps, s)
	}
	c.Transitions = nil // the run ends
	b.ReportAllocs()
	for b.Loop() {
		call := newCommitCall(c, 1)
		call.add(c, 1)
		call.finish()
	}
}
