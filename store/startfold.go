package store

// A start folded into its run's first commit. A fresh run whose first steps are pure
// and run in the process that starts it (engine: startInline) needs no activation: the
// start is written by the commit of those steps, in the same script call (commit.lua's
// N and H ops): the run's first checkpoint, its state and input, the run hash's fields
// and the partition's runs set, then the steps as any commit writes them. The run is
// created and its first steps committed atomically, or neither; nothing is read from a
// node stream, fenced or acknowledged. A commit with a Start has no entry (Act.ID "")
// and Act.Ckpt is Start.Ckpt, the first step's parent.

// appendStartOps appends a start's ops (N, then an H per run hash field but its version
// and created_at, which the script writes: startOps) to args.
func (a *StartArgs) appendStartOps(args []any, call *commitCall, n int, k Keys) []any {
	in, _ := a.input()
	args = append(args, opStart, a.Ckpt, a.Checkpoint.Node, a.Checkpoint.Parent, a.Checkpoint.inputBody(a.Fields),
		a.firstState(), in, a.Version, a.Trace, call.streamIndex(k.Runs(), n))
	for i := 0; i+1 < len(a.Fields); i += 2 {
		if a.Fields[i] != inputField { // kept in the state hash (N's INPUT)
			args = append(args, opRunField, a.Fields[i], a.Fields[i+1])
		}
	}
	return args
}

// startOps is the number of ops appendStartOps appends.
func (a *StartArgs) startOps() int {
	n := 1 + len(a.Fields)/2
	if _, i := a.input(); i >= 0 {
		n--
	}
	return n
}
