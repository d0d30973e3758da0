package store

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func mustScript(name string) *redis.Script {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}

// mustPreludeScript is a script that uses the op codes and replies of store/ops.go: the
// prelude that defines them goes before it.
func mustPreludeScript(name string) *redis.Script {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(scriptPrelude() + string(b))
}

// The Lua scripts; each file's header documents its KEYS and ARGV.
var (
	commitScript      = mustPreludeScript("commit")
	failScript        = mustScript("fail")
	reclaimScript     = mustScript("reclaim")
	heartbeatScript   = mustScript("heartbeat")
	startScript       = mustScript("start")
	cancelScript      = mustScript("cancel")
	resumeScript      = mustScript("resume")
	retryDeadScript   = mustScript("retry_dead")
	turnScript        = mustScript("turn")
	discardDeadScript = mustScript("discard_dead")
	pruneScript       = mustScript("prune")
	dropScript        = mustScript("drop")
)

var allScripts = []*redis.Script{commitScript, failScript, reclaimScript, heartbeatScript, startScript, cancelScript, resumeScript, retryDeadScript, turnScript, discardDeadScript, pruneScript, dropScript,
	cacheStoreScript, cacheReleaseScript, cacheExtendScript}

// LoadScripts loads every script into Redis's script cache, so pipelines can use EVALSHA.
func (r *Redis) LoadScripts(ctx context.Context) error {
	// Not in a pipeline: go-redis's Script.Load reads the digest from the reply as soon
	// as it returns, which in a pipeline is before the reply exists.
	for _, s := range allScripts {
		if err := s.Load(ctx, r.Client).Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// promise runs a script whose write answers a caller (a run started, resumed or
// cancelled). With Options.WaitReplicas it is followed, on the same connection, by WAIT:
// the answer is given once that many replicas have the write, so a failover cannot lose
// it; a write the replicas did not confirm in time fails as unavailable (it is on the
// master and may still be lost). keys[0] names the node on a cluster.
func (r *Redis) promise(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if r.wait <= 0 {
		return s.Run(ctx, r.Client, keys, args...)
	}
	var c *redis.Client
	switch cl := r.Client.(type) {
	case *redis.ClusterClient:
		node, err := cl.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		c = node
	case *redis.Client:
		c = cl
	default:
		return s.Run(ctx, r.Client, keys, args...)
	}
	cmd, w := evalWait(ctx, c, s, true, r.wait, r.waitFor, keys, args)
	if isNoScript(cmd.Err()) {
		// Nothing was written: send the script itself.
		cmd, w = evalWait(ctx, c, s, false, r.wait, r.waitFor, keys, args)
	}
	if cmd.Err() == nil {
		if n, err := w.Int64(); err != nil {
			cmd.SetErr(fmt.Errorf("wait for replicas: %w", err))
		} else if n < int64(r.wait) {
			cmd.SetErr(&flows.Error{Code: flows.Unavailable, Message: fmt.Sprintf(
				"written on the Redis master but confirmed by %d of %d replicas within %s (wait_replicas): it may be lost if the master fails now; check the replicas", n, r.wait, r.waitFor)})
		}
	}
	return cmd
}

// evalWait sends a script and WAIT in one pipeline: one connection, one round trip.
func evalWait(ctx context.Context, c *redis.Client, s *redis.Script, sha bool, replicas int, timeout time.Duration, keys []string, args []any) (*redis.Cmd, *redis.Cmd) {
	pipe := c.Pipeline()
	var cmd *redis.Cmd
	if sha {
		cmd = s.EvalSha(ctx, pipe, keys, args...)
	} else {
		cmd = s.Eval(ctx, pipe, keys, args...)
	}
	w := pipe.Do(ctx, "wait", replicas, timeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	return cmd, w
}
