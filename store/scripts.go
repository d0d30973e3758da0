package store

import (
	"context"
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
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

// The Lua scripts; each file's header documents its KEYS and ARGV.
var (
	commitScript      = mustScript("commit")
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
