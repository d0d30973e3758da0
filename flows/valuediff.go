package flows

// DiffValues lists the differences from JSON value a to b, by path ("label",
// "items[2].name"; "." for the value itself), in path order: what a test's comparison of
// two versions' outputs shows.
func DiffValues(a, b any) []ValueChange { return diffValues("", JSONValue(a), JSONValue(b)) }
