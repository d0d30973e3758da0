package store

// Every Redis key Sluice uses is built here. All keys of one flow share the hash tag
// {f:<flow>}, so a step's commit touches one slot and stays one atomic script on Redis
// Cluster too.

// Group is the consumer group every node stream has.
const Group = "sluice"

// DispatchGroup is the consumer group on a flow's results stream that delivers result
// webhooks; the stream is trimmed only below what it has acknowledged.
const DispatchGroup = "dispatch"

// scheduledKey is the set of flow ids whose current version has schedules: what the
// schedulers look at, so that flows without schedules cost them nothing.
const scheduledKey = "sluice:scheduled"

// Keys names the keys of one flow.
type Keys struct {
	flow   string
	prefix string
}

// FlowKeys returns the key names of flow.
func FlowKeys(flow string) Keys { return Keys{flow: flow, prefix: "sluice:{f:" + flow + "}:"} }

// Flow is the flow id.
func (k Keys) Flow() string { return k.flow }

// Prefix is what every key of the flow starts with.
func (k Keys) Prefix() string { return k.prefix }

// In is the stream of NODE's activations (group "sluice").
func (k Keys) In(node string) string { return k.prefix + "in:" + node }

// Nodes is the set of node ids that have streams, over every published version.
func (k Keys) Nodes() string { return k.prefix + "nodes" }

// Version holds the flow JSON of a version.
func (k Keys) Version(v string) string { return k.prefix + "v:" + v }

// Current holds the version new runs start on when none is named.
func (k Keys) Current() string { return k.prefix + "current" }

// Versions is the sorted set of the versions that were made current (saved, published,
// rolled back to), scored by when that first happened (ms).
func (k Keys) Versions() string { return k.prefix + "versions" }

// VersionNotes is the hash of the messages given when versions were saved.
func (k Keys) VersionNotes() string { return k.prefix + "versions:notes" }

// ScheduleTicks is the sorted set of schedule keys scored by the last tick (ms) that
// was run or passed over; a tick at or before it never runs again.
func (k Keys) ScheduleTicks() string { return k.prefix + "schedules:ticks" }

// SchedulePaused is the hash of paused schedule keys (value: when, ms).
func (k Keys) SchedulePaused() string { return k.prefix + "schedules:paused" }

// ScheduleRuns is the capped list of the runs a schedule started, newest first.
func (k Keys) ScheduleRuns(schedule string) string { return k.prefix + "schedules:runs:" + schedule }

// Run is the hash of a run: status, version, input, outputs, error, counters, times.
func (k Keys) Run(run string) string { return k.prefix + "run:" + run }

// Runs is the sorted set of run ids by creation time (ms).
func (k Keys) Runs() string { return k.prefix + "runs" }

// Expiry is the sorted set of finished runs by the time (ms) their keys expire: the
// janitor removes them from Runs once they have.
func (k Keys) Expiry() string { return k.prefix + "expiry" }

// Ckpt is the stream of a run's checkpoints, in commit order.
func (k Keys) Ckpt(run string) string { return k.prefix + "ckpt:" + run }

// State is the hash of a run's states by checkpoint id.
func (k Keys) State(run string) string { return k.prefix + "state:" + run }

// Frames is the hash of a run's open forks: per fork, expected and arrived branches.
func (k Keys) Frames(run string) string { return k.prefix + "frames:" + run }

// Dead is the dead-letter stream.
func (k Keys) Dead() string { return k.prefix + "dead" }

// Events is the capped stream the live views read.
func (k Keys) Events() string { return k.prefix + "events" }

// Results is the stream of finished runs (group "dispatch").
func (k Keys) Results() string { return k.prefix + "results" }

// DeliveryDead is the stream of result webhooks that could not be delivered.
// (It belongs with the other key names in keys.go; it is here until that file's owner
// moves it.)
func (k Keys) DeliveryDead() string { return k.prefix + "delivery-dead" }

// Waits is the sorted set of approvals with a timeout, by deadline (ms); members are
// "RUN NODE".
func (k Keys) Waits() string { return k.prefix + "waits" }

// Cache is a cached result.
func (k Keys) Cache(key string) string { return k.prefix + "cache:" + key }

// Lock is the single-flight lock of a cached computation.
func (k Keys) Lock(key string) string { return k.prefix + "lock:" + key }

// RunKeys are the keys that belong to one run and expire with it.
func (k Keys) RunKeys(run string) []string {
	return []string{k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run)}
}

// LimitKeys names the keys of one LLM provider's shared rate limits. They are not a
// flow's: every flow that calls the provider shares them. All of them carry the hash tag
// {rl:PROVIDER}, so one script checks a provider's limit and a model's own at once.
type LimitKeys struct{ prefix string }

// ProviderLimitKeys returns the rate-limit key names of provider.
func ProviderLimitKeys(provider string) LimitKeys {
	return LimitKeys{prefix: "sluice:{rl:" + provider + "}:"}
}

// Slots is a scope's sorted set of request slots ("" is the provider's own limit, else a
// model's).
func (k LimitKeys) Slots(model string) string { return k.prefix + "slots:" + model }

// Tokens is a scope's hash of the tokens each slot took.
func (k LimitKeys) Tokens(model string) string { return k.prefix + "tokens:" + model }

// Pause holds when a model of the provider may be called again after a 429.
func (k LimitKeys) Pause(model string) string { return k.prefix + "pause:" + model }

// Spend is the hash of what a run has spent on models: tokens, micro-dollars.
func (k Keys) Spend(run string) string { return k.prefix + "spend:" + run }

// SpendDay is the hash of what the flow spent on models on one UTC day (2006-01-02).
func (k Keys) SpendDay(day string) string { return k.prefix + "spend-day:" + day }
