package store

import "context"

// Who saved each version of a flow (docs/teams.md): the person, key or SLUICE_TOKEN
// whose save or import first made it, as the server knows them. A version made from a
// file in a flows folder has none.

// NoteSavedBy records who saved version of flow, unless someone saved it before.
func (r *Redis) NoteSavedBy(ctx context.Context, flow, version, who string) error {
	if who == "" {
		return nil
	}
	return r.Client.HSetNX(ctx, FlowKeys(flow).VersionAuthors(), version, who).Err()
}

// SavedBy returns who saved each of flow's versions, by version.
func (r *Redis) SavedBy(ctx context.Context, flow string) (map[string]string, error) {
	return r.Client.HGetAll(ctx, FlowKeys(flow).VersionAuthors()).Result()
}
