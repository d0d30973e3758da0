package store

import (
	"fmt"
	"strconv"
)

// A Transition is one thing a committed step does to its run besides recording its
// checkpoint: activate a node, open or grow a fork, arrive at a join, give a branch's
// token back, park for a person. The engine computes them (one pure function of the
// plan, the node, the step's result and its fork tokens); only this package turns them
// into the commit script's arguments, and commit.lua checks every op before it writes.
type Transition interface {
	// op is the commit script's op code and its arguments; key names a stream the op
	// needs in KEYS ("" for none).
	op(k Keys) (code string, key string, args []string)
}

// Ref names a checkpoint a transition reads: 0 is the commit's last step; k > 0 is the
// k-th Seed or Branch of the same commit (a fanout item's own checkpoint, or the last
// step of a branch run inline).
type Ref int

func (r Ref) String() string { return strconv.Itoa(int(r)) }

// Activate adds an activation of Node that reads checkpoint From with fork tokens Tokens.
type Activate struct {
	Node   string
	From   Ref
	Tokens string
}

// Seed records a fanout item's checkpoint (kind "send") after the last step: Update is
// the item, State the state its branch starts from. Seeds are numbered from 1 in the
// order they appear.
type Seed struct {
	Update []byte
	State  []byte
}

// Branch records steps run inline, in the same commit, along a branch of a fork the
// commit's last step opened: one checkpoint entry for them all (like a commit's fused
// steps: ids "<entry>.0", …, the last the entry's id), whose first step's parent is the
// checkpoint it read (From: the commit's last step, or its seed), numbered on from the run's steps, with the last step's state and
// the steps' live events. Like a Seed it becomes the next ref: the transition that ends
// the branch (an Arrive at the join, an Activate of a node that does not run inline, a
// GiveBack) reads it, and an Activate reading it is len(Steps) steps deeper than the
// commit's other activations. Its steps' outputs (Final) and tokens count as the
// commit's own. Only the last step's state is stored, and only when it is not nil: a
// branch that arrives at its join needs none (the join reads the branch's updates), and
// the history computes it when asked, as it does a fused step's.
type Branch struct {
	Steps []CommitStep
	// From is the checkpoint the branch's first step read: 0 the commit's last step, k
	// the k-th seed of the same commit (a fanout's item, whose branch it is).
	From Ref
}

// Joined records the join of a fork the commit's last step opened, run in the same
// commit because every branch reached it there (each the last step of a Branch before
// it, or the commit's last step itself), and the pure steps after it as far as a chain
// fuses: one checkpoint entry (like a Branch's: ids "<entry>.0", …, node the last
// step's, the steps numbered on), whose first step, the join (kind "join"), has the
// commit's last step for its parent and the checkpoints Arrivals name, in branch
// order, for its branches ("br", which the script fills in: it alone knows their ids),
// with the last step's State (which must be set) and the steps' live events. The fork
// it closes never reaches the frames hash: the commit has no OpenFork, Arrive or
// GiveBack of it. Like a Branch it becomes the next ref, len(Steps) steps deeper than
// the commit's other activations, which the transition after it (an Activate, an
// Arrive at an outer join) reads; its steps' outputs and tokens count as the commit's,
// and it is the run's last checkpoint.
type Joined struct {
	Steps    []CommitStep
	Arrivals []Ref
}

// OpenFork opens fork Frame with Branches branches meeting at node Join; Outer is the
// token stack outside the fork, Base the checkpoint the branches start from.
type OpenFork struct {
	Frame    string
	Branches int
	Outer    string
	Base     Ref
	Join     string
}

// Split says the current branch of Frame became More+1 branches.
type Split struct {
	Frame string
	More  int
}

// Arrive records that branch Branch of Frame reached its join Join with checkpoint
// From; the join is activated when the last live branch is in.
type Arrive struct {
	Frame  string
	Branch string
	From   Ref
	Join   string
}

// GiveBack says a branch of Frame ended somewhere other than its join Join.
type GiveBack struct {
	Frame string
	Join  string
}

// CloseFork forgets Frame: its join has run.
type CloseFork struct {
	Frame string
}

// Park keeps the run's activation live without a stream entry until a person answers
// (an approval). Record is the wait record JSON; Deadline (unix ms, 0 for none) is when
// the sweeper decides for the person.
type Park struct {
	Record   []byte
	Deadline int64
}

func (t Activate) op(k Keys) (string, string, []string) {
	return opActivate, k.In(t.Node), []string{"KEY", t.From.String(), t.Tokens}
}

func (t Seed) op(Keys) (string, string, []string) {
	return opSeed, "", []string{string(t.Update), string(t.State)}
}

// A branch keeps its first step's output even when it is the state the step read (false:
// the marker packedBody would use is for a commit's own first step, whose parent the
// commit names).
func (t Branch) op(Keys) (string, string, []string) {
	return opBranch, "", entryArgs(t.Steps, t.From.String())
}

func (t Joined) op(Keys) (string, string, []string) {
	refs := make([]byte, 0, 2*len(t.Arrivals))
	for i, r := range t.Arrivals {
		if i > 0 {
			refs = append(refs, ',')
		}
		refs = strconv.AppendInt(refs, int64(r), 10)
	}
	return opJoined, "", entryArgs(t.Steps, string(refs))
}

// entryArgs are the arguments of a B or J op: NODE K BODY EVENTS STATE, then ref.
func entryArgs(steps []CommitStep, ref string) []string {
	last := steps[len(steps)-1]
	return []string{last.Node, strconv.Itoa(len(steps)), string(packedBody(steps, false)), string(stepEventsJSON(steps)), string(last.State), ref}
}

func (t OpenFork) op(k Keys) (string, string, []string) {
	return opOpenFork, k.In(t.Join), []string{t.Frame, strconv.Itoa(t.Branches), t.Outer, t.Base.String(), "KEY"}
}

func (t Split) op(Keys) (string, string, []string) {
	return opSplit, "", []string{t.Frame, strconv.Itoa(t.More)}
}

func (t Arrive) op(k Keys) (string, string, []string) {
	return opArrive, k.In(t.Join), []string{t.Frame, t.Branch, t.From.String(), "KEY"}
}

func (t GiveBack) op(k Keys) (string, string, []string) {
	return opGiveBack, k.In(t.Join), []string{t.Frame, "KEY"}
}

func (t CloseFork) op(Keys) (string, string, []string) {
	return opClose, "", []string{t.Frame}
}

func (t Park) op(Keys) (string, string, []string) {
	return opPark, "", []string{string(t.Record), strconv.FormatInt(t.Deadline, 10)}
}

// String describes a transition for tests and logs.
func Describe(t Transition) string {
	switch x := t.(type) {
	case Activate:
		return fmt.Sprintf("activate %s from %d tok %q", x.Node, x.From, x.Tokens)
	case Seed:
		return fmt.Sprintf("seed %s", x.Update)
	case Branch:
		return fmt.Sprintf("branch %v from %d", stepNodes(x.Steps), x.From)
	case Joined:
		return fmt.Sprintf("joined %v from %v", stepNodes(x.Steps), x.Arrivals)
	case OpenFork:
		return fmt.Sprintf("open %s n=%d outer %q base %d join %s", x.Frame, x.Branches, x.Outer, x.Base, x.Join)
	case Split:
		return fmt.Sprintf("split %s +%d", x.Frame, x.More)
	case Arrive:
		return fmt.Sprintf("arrive %s branch %s from %d join %s", x.Frame, x.Branch, x.From, x.Join)
	case GiveBack:
		return fmt.Sprintf("giveback %s join %s", x.Frame, x.Join)
	case CloseFork:
		return fmt.Sprintf("close %s", x.Frame)
	case Park:
		return fmt.Sprintf("park until %d", x.Deadline)
	}
	return fmt.Sprintf("%T", t)
}

func stepNodes(steps []CommitStep) []string {
	nodes := make([]string, len(steps))
	for i, st := range steps {
		nodes[i] = st.Node
	}
	return nodes
}

var (
	_ Transition = Activate{}
	_ Transition = Seed{}
	_ Transition = Branch{}
	_ Transition = Joined{}
	_ Transition = OpenFork{}
	_ Transition = Split{}
	_ Transition = Arrive{}
	_ Transition = GiveBack{}
	_ Transition = CloseFork{}
	_ Transition = Park{}
)
