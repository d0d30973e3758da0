package main

import (
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// attachBlocks gives the building blocks what they keep in Redis: conversations and the
// long-term store (memory, memory_store).
func attachBlocks(env *nodes.Env, rdb *store.Redis) {
	env.Memory = store.NewMemory(rdb)
}
