package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// MissingGroups lists the node streams of flow whose consumer group does not exist
// (Redis restarted empty, or the flow was never published): a worker is not ready to
// take the flow's work until it has created them. One round trip.
func (r *Redis) MissingGroups(ctx context.Context, flow string) ([]string, error) {
	nodes, err := r.FlowNodes(ctx, flow)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("flow %q has no nodes in Redis (not published yet?)", flow)
	}
	sort.Strings(nodes)
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.XInfoGroupsCmd, len(nodes))
	for i, n := range nodes {
		cmds[i] = pipe.XInfoGroups(ctx, k.In(n))
	}
	_, _ = pipe.Exec(ctx)
	var missing []string
	for i, n := range nodes {
		gs, err := cmds[i].Result()
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		found := false
		for _, g := range gs {
			found = found || g.Name == Group
		}
		if !found {
			missing = append(missing, n)
		}
	}
	return missing, nil
}
