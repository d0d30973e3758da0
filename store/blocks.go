package store

import (
	"embed"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// The building blocks' Lua scripts live in blocks/, apart from the engine's in lua/;
// each file's header documents its KEYS and ARGV.
//
//go:embed blocks/*.lua
var blockFiles embed.FS

func blockScript(name string) *redis.Script {
	b, err := blockFiles.ReadFile("blocks/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}

// escapeLabel writes a label that comes from a user (a session id, a collection name)
// so that it cannot end a hash tag or another key's part early.
func escapeLabel(s string) string { return url.PathEscape(s) }
