package store

// The replies of the scripts the engine acts on, typed: the engine switches on these
// constants, never on the scripts' strings, and TestScriptRepliesAreTheTypedOnes checks
// that each script returns only what its type names. (commit.lua's are CommitStatus.)

// FailStatus is what fail.lua did with a failed step (Fail).
type FailStatus string

const (
	// FailRetry: the entry stays pending for another attempt.
	FailRetry FailStatus = "retry"
	// FailDead: the entry moved to the dead letters, and the run failed.
	FailDead FailStatus = "dead"
	// FailDropped: the run was cancelled or is gone; the entry is acknowledged.
	FailDropped FailStatus = "dropped"
	// FailStale: the entry is no longer this consumer's; nothing was written.
	FailStale FailStatus = "stale"
)

// DropStatus is what drop.lua did with an activation of a cancelled or lost run (Drop).
type DropStatus string

const (
	// DropDone: the entry is acknowledged without running (and an interrupted step
	// recorded, when one was given).
	DropDone DropStatus = "dropped"
	// DropStale: the entry is no longer this consumer's.
	DropStale DropStatus = "stale"
	// DropRunning: the run is neither cancelled nor gone (a retried dead letter
	// reopened it): nothing was dropped.
	DropRunning DropStatus = "running"
)
