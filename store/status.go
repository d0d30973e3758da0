package store

// StatusChange is one change of a run's status the store makes: from a status ("" for
// a new run) to another, by a script (or StartRun's transaction), and when.
type StatusChange struct {
	From, To string
	By       string // the script file in store/lua, or "StartRun"
	When     string
}

// RunStatusChanges is the run status state machine: every change of a run's status and
// what makes it, and nothing else. docs/runtime.md ("The run status") shows this table,
// and TestTheRunStatusMachineIsTheOneTheScriptsAndDocsFollow checks that the docs say
// the same and that each script writes only statuses it may reach here. Finished runs
// (succeeded, failed, cancelled) change only where a row says so.
var RunStatusChanges = []StatusChange{
	{"", StatusQueued, "StartRun", "a run is started (start.lua for a run id the caller chose)"},
	{"", StatusRunning, "commit.lua", "the commit of its first steps starts it (a start that runs them) and something is still live"},
	{"", StatusWaiting, "commit.lua", "the commit of its first steps starts it and parks it for a person"},
	{"", StatusSucceeded, "commit.lua", "the commit of its first steps starts it and leaves nothing live"},
	{StatusQueued, StatusRunning, "commit.lua", "its first step commits and something is still live"},
	{StatusQueued, StatusWaiting, "commit.lua", "its first step parks it for a person"},
	{StatusQueued, StatusSucceeded, "commit.lua", "its first commit leaves nothing live"},
	{StatusRunning, StatusWaiting, "commit.lua", "every live activation is parked for a person"},
	{StatusRunning, StatusSucceeded, "commit.lua", "a commit leaves nothing live and no dead letter"},
	{StatusWaiting, StatusRunning, "commit.lua", "a step commits while something is live and not parked"},
	{StatusWaiting, StatusSucceeded, "commit.lua", "a commit leaves nothing live and no dead letter"},
	{StatusQueued, StatusFailed, "commit.lua", "it goes deeper than max_steps, or ends with a dead letter"},
	{StatusRunning, StatusFailed, "commit.lua", "it goes deeper than max_steps, or ends with a dead letter"},
	{StatusWaiting, StatusFailed, "commit.lua", "it goes deeper than max_steps, or ends with a dead letter"},
	{StatusQueued, StatusFailed, "fail.lua", "a step moves to the dead letters"},
	{StatusRunning, StatusFailed, "fail.lua", "a step moves to the dead letters"},
	{StatusWaiting, StatusFailed, "fail.lua", "a step moves to the dead letters"},
	{StatusWaiting, StatusRunning, "resume.lua", "a person answers an approval"},
	{StatusFailed, StatusRunning, "retry_dead.lua", "a dead letter of it is retried"},
	{StatusQueued, StatusCancelled, "cancel.lua", "it is cancelled"},
	{StatusRunning, StatusCancelled, "cancel.lua", "it is cancelled"},
	{StatusWaiting, StatusCancelled, "cancel.lua", "it is cancelled"},
}
