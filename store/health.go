package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"

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
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([][]*redis.XInfoGroupsCmd, len(nodes))
	for i, n := range nodes {
		for _, pr := range parts {
			cmds[i] = append(cmds[i], pipe.XInfoGroups(ctx, pr.keys().In(n)))
		}
	}
	_, _ = pipe.Exec(ctx)
	var missing []string
	for i, n := range nodes {
		for j, c := range cmds[i] {
			gs, err := c.Result()
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			found := false
			for _, g := range gs {
				found = found || g.Name == Group
			}
			if !found {
				name := n
				if p := parts[j].Part; p > 0 {
					name += "@" + strconv.Itoa(p)
				}
				missing = append(missing, name)
			}
		}
	}
	return missing, nil
}
