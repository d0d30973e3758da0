package store

import "strconv"

// Every Redis key Sluice uses is built here.
//
// A flow's runs are spread over its partitions (the partitions setting: 1 on a single
// Redis, e.g. 16 on a Redis Cluster); a run lives on one partition for its whole life.
// Every key one step's commit touches — the node streams of the partition, the run's
// hash, checkpoints, states and frames, the partition's events, results, dead letters,
// waits, run index and expiry — carries the partition's hash tag, so a commit is one
// atomic script on one shard.
//
// Partition 0 is the flow's home: runs placed on one partition live there, under the
// flow's own tag {f:<flow>}, with what belongs to the flow as a whole (its versions,
// current version, nodes, partitions, schedules, failed deliveries). Partitions 1..P
// carry a tag shared by every flow, {p:<n>} (see partTag), so that a worker reads the
// streams of all its flows on one partition in one blocking read even on a cluster,
// where one command reaches one slot: a worker holds one reading connection per
// partition, not per flow and partition. A cached result and its lock carry a tag of
// their own, so caches spread over a cluster too.

// Group is the consumer group every node stream has.
const Group = "sluice"

// DispatchGroup is the consumer group on a flow's results stream that delivers result
// webhooks; the stream is trimmed only below what it has acknowledged.
const DispatchGroup = "dispatch"

// partitionsKey is the hash of the partition counts flows' runs were ever placed with:
// a field "<flow>:<n>" per flow and count. Readers read partition 0 of a flow if 1 is
// among its counts and partitions 1..the largest, and a run is found where one of them
// put it. One key for every flow: a process reads all of them in one command.
const partitionsKey = "sluice:partitions"

// scheduledKey is the set of flow ids whose current version has schedules: what the
// schedulers look at, so that flows without schedules cost them nothing.
const scheduledKey = "sluice:scheduled"

// Keys names the keys of one partition of a flow, and the flow's own.
type Keys struct {
	flow   string
	part   int
	prefix string // the partition's keys
	fwide  string // the flow's own keys
}

// FlowKeys returns the key names of flow's partition 0 and its flow-wide keys.
func FlowKeys(flow string) Keys { return PartKeys(flow, 0) }

// PartKeys returns the key names of partition part of flow.
func PartKeys(flow string, part int) Keys {
	fwide := "sluice:{f:" + flow + "}:"
	prefix := fwide
	if part > 0 {
		prefix = "sluice:{" + partTag(part) + "}:" + flow + ":"
	}
	return Keys{flow: flow, part: part, prefix: prefix, fwide: fwide}
}

// tagOf is the hash tag of partition part of flow.
func tagOf(flow string, part int) string {
	if part > 0 {
		return partTag(part)
	}
	return "f:" + flow
}

// Flow is the flow id.
func (k Keys) Flow() string { return k.flow }

// Part is the partition.
func (k Keys) Part() int { return k.part }

// Prefix is what every key of the partition starts with.
func (k Keys) Prefix() string { return k.prefix }

// FlowPrefix is what every flow-wide key of the flow starts with (partition 0's keys
// too).
func (k Keys) FlowPrefix() string { return k.fwide }

// KeyPatterns are SCAN patterns that together match every key of flow: its partitions',
// its cached results' and what its building blocks keep in its own scope (memory
// sessions, the long-term store, vector collections, files).
func KeyPatterns(flow string) []string {
	return []string{"sluice:{f:" + flow + "}:*", "sluice:{p:*}:" + flow + ":*", "sluice:{c:" + flow + ":*",
		"sluice:{m:f:" + flow + ":*", "sluice:{st:f:" + flow + "}:*", "sluice:{v:f:" + flow + ":*", "sluice:{file:" + flow + ":*"}
}

// In is the stream of NODE's activations (group "sluice").
func (k Keys) In(node string) string { return k.prefix + "in:" + node }

// Nodes is the set of node ids that have streams, over every published version.
func (k Keys) Nodes() string { return k.fwide + "nodes" }

// Version holds the flow JSON of a version.
func (k Keys) Version(v string) string { return k.fwide + "v:" + v }

// Current holds the version new runs start on when none is named.
func (k Keys) Current() string { return k.fwide + "current" }

// EnvVersions is the hash of the version each environment but the first points at
// (environments.go); the first environment's is Current.
func (k Keys) EnvVersions() string { return k.fwide + "envs" }

// Promotions is the capped stream of the flow's promotions: environment, version, by
// whom, with which test result.
func (k Keys) Promotions() string { return k.fwide + "promotions" }

// Versions is the sorted set of the versions that were made current (saved, published,
// rolled back to), scored by when that first happened (ms).
func (k Keys) Versions() string { return k.fwide + "versions" }

// VersionNotes is the hash of the messages given when versions were saved.
func (k Keys) VersionNotes() string { return k.fwide + "versions:notes" }

// VersionAuthors is the hash of who first saved each version (authors.go).
func (k Keys) VersionAuthors() string { return k.fwide + "versions:by" }

// TestResults is the hash of each version's last test result (the summary of its cases'
// verdicts): version -> JSON, kept as long as the version history.
func (k Keys) TestResults() string { return k.fwide + "tests" }

// TestResult holds the whole last test result of a version (each case's output and node
// outputs too), for TestResultTTL.
func (k Keys) TestResult(version string) string { return k.fwide + "tests:" + version }

// ScheduleTicks is the sorted set of schedule keys scored by the last tick (ms) that
// was run or passed over; a tick at or before it never runs again.
func (k Keys) ScheduleTicks() string { return k.fwide + "schedules:ticks" }

// SchedulePaused is the hash of paused schedule keys (value: when, ms).
func (k Keys) SchedulePaused() string { return k.fwide + "schedules:paused" }

// ScheduleRuns is the capped list of the runs a schedule started, newest first.
func (k Keys) ScheduleRuns(schedule string) string { return k.fwide + "schedules:runs:" + schedule }

// ScheduleClaim holds the partition count the run of a schedule's tick (ms) is placed
// with, set by the first scheduler to claim the tick; it expires once the tick is past.
func (k Keys) ScheduleClaim(schedule string, tick int64) string {
	return k.fwide + "schedules:claim:" + schedule + ":" + strconv.FormatInt(tick, 10)
}

// Run is the hash of a run: status, version, input, outputs, error, counters, times.
func (k Keys) Run(run string) string { return k.prefix + "run:" + run }

// Runs is the sorted set of run ids by creation time (ms).
func (k Keys) Runs() string { return k.prefix + "runs" }

// Expiry is the sorted set of finished runs by the time (ms) their retention ends: the
// janitor (every worker's sweeper) then deletes their keys and removes them from Runs.
func (k Keys) Expiry() string { return k.prefix + "expiry" }

// Ckpt is the stream of a run's checkpoints, in commit order.
func (k Keys) Ckpt(run string) string { return k.prefix + "ckpt:" + run }

// State is the hash of a run's states by checkpoint id, and of its input (the field
// "input", see inputField): kept here, with the run's other large values, and not in
// the run hash, which then stays a listpack (hash-max-listpack-value: every field of a
// run hash is small but its input, its output and an error).
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
func (k Keys) DeliveryDead() string { return k.fwide + "delivery-dead" }

// Waits is the sorted set of approvals with a timeout, by deadline (ms); members are
// "RUN NODE".
func (k Keys) Waits() string { return k.prefix + "waits" }

// Cache is a cached result. It and its lock share a tag of their own (the key's), not
// the flow's: a flow's cache spreads over a cluster's shards.
func (k Keys) Cache(key string) string { return "sluice:{c:" + k.flow + ":" + key + "}:cache" }

// Lock is the single-flight lock of a cached computation.
func (k Keys) Lock(key string) string { return "sluice:{c:" + k.flow + ":" + key + "}:lock" }

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

// Spend is the hash of what a run has spent on models: tokens, micro-dollars. It is on
// the run's partition (with its hash tag), so a model call's spend goes to the run's
// slot and not to one key of the flow.
func (k Keys) Spend(run string) string { return k.prefix + "spend:" + run }

// SpendDay is the hash of what the flow's runs on this partition spent on models on one
// UTC day (2006-01-02): the flow's day is the sum over its partitions (Ledger.Spent).
// Partition 0's is the flow's own key, where every run's spend went before the ledger
// was partitioned, so a flow's older spend of the day is still counted.
func (k Keys) SpendDay(day string) string { return k.prefix + "spend-day:" + day }

// LegacySpend is where a run's spend was kept before the ledger was partitioned: the
// flow's own tag. Only runs on partitions ≥ 1 had it elsewhere (Ledger.Spend moves it).
func (k Keys) LegacySpend(run string) string { return k.fwide + "spend:" + run }

// Dedupe holds, for a while, the run a request to the OpenAI-compatible endpoint started,
// by a hash of the request and its caller: a client's retry of it finds the run instead
// of starting another.
func (k Keys) Dedupe(hash string) string { return k.fwide + "dedupe:" + hash }

// ---- The building blocks' keys: memory, the long-term store, files, vector collections.
//
// None of them belongs to a run or a partition, so each carries a hash tag of its own: a
// session's history, a store scope, a file, a vector collection. What one operation
// changes shares its tag (one atomic script or transaction on one slot), and a
// deployment's sessions, files and collections spread over a cluster's shards. A scope is
// "f:FLOW" (the flow's own) or "s:NAME" (shared by every flow of the default workspace
// that names it; "s:WS.NAME" in workspace WS: docs/teams.md); labels that
// come from users (session ids, collection names, file ids) are path-escaped, so no brace
// of theirs can change a tag.

// HistoryKeys names the keys of one conversation of the memory component.
type HistoryKeys struct{ prefix string }

// SessionKeys returns the key names of session's history in scope.
func SessionKeys(scope, session string) HistoryKeys {
	return HistoryKeys{prefix: "sluice:{m:" + scope + ":" + escapeLabel(session) + "}:"}
}

// Messages is the list of the session's messages after its summary, oldest first; each
// entry is "SEQ\tJSON".
func (k HistoryKeys) Messages() string { return k.prefix + "history" }

// Meta is the hash of the session's message counter (seq), its summary (summary) and
// the last message the summary covers (through).
func (k HistoryKeys) Meta() string { return k.prefix + "meta" }

// ItemKeys names the keys of one scope of the long-term store.
type ItemKeys struct{ prefix string }

// StoreScopeKeys returns the key names of the long-term store's scope.
func StoreScopeKeys(scope string) ItemKeys { return ItemKeys{prefix: "sluice:{st:" + scope + "}:"} }

// Item holds one item's JSON; path is its namespace and key as itemPath writes them.
func (k ItemKeys) Item(path string) string { return k.prefix + "item:" + path }

// Index is the sorted set (all scores 0) of the scope's item paths, searched by prefix
// with ZRANGEBYLEX. Items expire by themselves; their paths are dropped when found gone.
func (k ItemKeys) Index() string { return k.prefix + "index" }

// FileKeys names the keys of one file kept for a flow's runs.
type FileKeys struct{ prefix string }

// FileKeysOf returns the key names of file id of flow.
func FileKeysOf(flow, id string) FileKeys {
	return FileKeys{prefix: "sluice:{file:" + flow + ":" + escapeLabel(id) + "}:"}
}

// Meta is the hash describing the file (flows.FileInfo's fields).
func (k FileKeys) Meta() string { return k.prefix + "meta" }

// Data holds the file's bytes when it is kept in Redis.
func (k FileKeys) Data() string { return k.prefix + "data" }

// filesExpiryKey is the sorted set of files kept in the object store, "FLOW/ID" scored
// by when they expire (ms): their objects are deleted once past it.
const filesExpiryKey = "sluice:files:expiry"

// VectorKeys names the keys of one vector collection.
type VectorKeys struct{ prefix string }

// CollectionKeys returns the key names of collection in scope.
func CollectionKeys(scope, collection string) VectorKeys {
	return VectorKeys{prefix: "sluice:{v:" + scope + ":" + escapeLabel(collection) + "}:"}
}

// Docs is the hash of the collection's chunks: id -> JSON {text, metadata}.
func (k VectorKeys) Docs() string { return k.prefix + "docs" }

// Vectors is the hash of the chunks' embeddings: id -> little-endian float32s.
func (k VectorKeys) Vectors() string { return k.prefix + "vectors" }

// Changes is the sorted set of every chunk id scored by the collection version that last
// changed it (deleted ones too, until pruned): what a worker's index reads to catch up.
func (k VectorKeys) Changes() string { return k.prefix + "changes" }

// Meta is the hash of the collection's version, dimensions, embedding model, the version
// below which deletions were pruned (floor) and the deleted ids still in Changes.
func (k VectorKeys) Meta() string { return k.prefix + "meta" }

// ReplayJob is the hash of a bulk replay job: its spec, status and counts. The job's keys
// are flow-wide (its runs live on every partition) and share the flow's tag.
func (k Keys) ReplayJob(job string) string { return k.fwide + "replay:" + job }

// ReplayJobRuns is the list of the runs a bulk replay job replays, fixed when it is made.
func (k Keys) ReplayJobRuns(job string) string { return k.fwide + "replay:" + job + ":runs" }

// ReplayJobDone is the hash of what replaying each run of a job gave: run -> JSON.
func (k Keys) ReplayJobDone(job string) string { return k.fwide + "replay:" + job + ":done" }

// ReplayJobLease is held by the process working on a job (its token; it expires).
func (k Keys) ReplayJobLease(job string) string { return k.fwide + "replay:" + job + ":lease" }

// ReplayJobs is the sorted set of a flow's bulk replay jobs by creation time (ms).
func (k Keys) ReplayJobs() string { return k.fwide + "replays" }

// TeamKeys names the keys of people, workspaces, members, API keys, sessions and the
// audit log (teams.go). They share one hash tag, {teams}, so that a change of several is
// one script on a Cluster; ns separates test suites sharing a Redis ("" in production).
type TeamKeys struct{ prefix string }

// NewTeamKeys returns the team key names of namespace ns.
func NewTeamKeys(ns string) TeamKeys { return TeamKeys{prefix: "sluice:{teams" + ns + "}:"} }

// People is the hash of people by id (JSON).
func (k TeamKeys) People() string { return k.prefix + "people" }

// Emails is the hash of person ids by lower-cased email.
func (k TeamKeys) Emails() string { return k.prefix + "emails" }

// Workspaces is the hash of workspaces by id (JSON).
func (k TeamKeys) Workspaces() string { return k.prefix + "workspaces" }

// Members is the hash of a workspace's members' roles by person id.
func (k TeamKeys) Members(ws string) string { return k.prefix + "members:" + ws }

// APIKeys is the hash of API keys by id (JSON, the secret's digest only).
func (k TeamKeys) APIKeys() string { return k.prefix + "keys" }

// KeyUsed is the hash of API keys' last use (ms) by id.
func (k TeamKeys) KeyUsed() string { return k.prefix + "keys:used" }

// Session is one signed-in browser, by the digest of its cookie; it expires with the
// session's lifetime.
func (k TeamKeys) Session(digest string) string { return k.prefix + "session:" + digest }

// PersonSessions is the set of a person's session digests (sign out everywhere, removal).
func (k TeamKeys) PersonSessions(person string) string { return k.prefix + "sessions:" + person }

// Reset is a one-time password link, by the digest of its token.
func (k TeamKeys) Reset(digest string) string { return k.prefix + "reset:" + digest }

// Audit is a workspace's append-only audit stream.
func (k TeamKeys) Audit(ws string) string { return k.prefix + "audit:" + ws }
