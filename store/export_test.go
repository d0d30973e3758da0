package store

// RawTransition is a transition with any op code and arguments, for tests of how the
// commit script treats an op it must refuse. Key, when set, is the stream the op's
// "KEY" argument names.
type RawTransition struct {
	Code string
	Key  string
	Args []string
}

func (t RawTransition) op(Keys) (string, string, []string) { return t.Code, t.Key, t.Args }
