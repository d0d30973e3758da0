package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// ForgetTeams removes, when the test ends, what it left in the team store that `sluice
// serve` keeps (namespace "", shared by every test on this Redis): the people with
// these emails — their accounts, memberships, API keys, sessions and password links —,
// these workspaces with their members, keys and audit logs, and the entries of the
// default workspace's audit log that name any of them. Register it before starting the
// server, so that it runs after the server stopped.
func ForgetTeams(t testing.TB, r *store.Redis, emails, workspaces []string) {
	t.Helper()
	t.Cleanup(func() { forgetTeams(r, emails, workspaces) })
}

func forgetTeams(r *store.Redis, emails, workspaces []string) {
	ctx := context.Background()
	k := store.NewTeamKeys("")
	c := r.Client
	var people []string
	for _, e := range emails {
		e = strings.ToLower(e)
		if id, err := c.HGet(ctx, k.Emails(), e).Result(); err == nil {
			people = append(people, id)
		}
		c.HDel(ctx, k.Emails(), e)
	}
	for _, id := range people {
		c.HDel(ctx, k.People(), id)
		if ds, err := c.SMembers(ctx, k.PersonSessions(id)).Result(); err == nil {
			for _, d := range ds {
				c.Del(ctx, k.Session(d))
			}
		}
		c.Del(ctx, k.PersonSessions(id))
	}
	// Memberships, in every workspace; password links not used.
	for _, pattern := range []string{k.Members("*"), k.Reset("*")} {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			if strings.HasPrefix(key, k.Reset("")) {
				if p, err := c.Get(ctx, key).Result(); err == nil && slices.Contains(people, p) {
					c.Del(ctx, key)
				}
				continue
			}
			if len(people) > 0 {
				c.HDel(ctx, key, people...)
			}
		}
	}
	keys, _ := c.HGetAll(ctx, k.APIKeys()).Result()
	for id, v := range keys {
		var key teams.APIKey
		if json.Unmarshal([]byte(v), &key) == nil && (slices.Contains(people, key.Person) || slices.Contains(workspaces, key.Workspace)) {
			c.HDel(ctx, k.APIKeys(), id)
			c.HDel(ctx, k.KeyUsed(), id)
		}
	}
	for _, ws := range workspaces {
		c.HDel(ctx, k.Workspaces(), ws)
		c.Del(ctx, k.Members(ws), k.Audit(ws))
	}
	names := append(append([]string(nil), emails...), workspaces...)
	if len(names) > 0 {
		forgetAudit(ctx, r, teams.DefaultWorkspace, func(e string) bool {
			for _, n := range names {
				if strings.Contains(e, n) {
					return true
				}
			}
			return false
		})
	}
}

// ForgetServiceKeys removes, when the test ends, the API keys of service accounts named
// service that the test made through `sluice serve` (namespace "", ForgetTeams), and
// the audit entries that name them.
func ForgetServiceKeys(t testing.TB, r *store.Redis, service string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		k := store.NewTeamKeys("")
		keys, _ := r.Client.HGetAll(ctx, k.APIKeys()).Result()
		var prefixes []string
		for id, v := range keys {
			var key teams.APIKey
			if json.Unmarshal([]byte(v), &key) == nil && key.Service == service {
				r.Client.HDel(ctx, k.APIKeys(), id)
				r.Client.HDel(ctx, k.KeyUsed(), id)
				prefixes = append(prefixes, key.Prefix)
			}
		}
		for _, ws := range []string{teams.DefaultWorkspace} {
			forgetAudit(ctx, r, ws, func(e string) bool {
				for _, p := range prefixes {
					if strings.Contains(e, p) {
						return true
					}
				}
				return false
			})
		}
	})
}

// forgetAudit deletes the entries of workspace ws's audit log (namespace "") whose JSON
// match says so.
func forgetAudit(ctx context.Context, r *store.Redis, ws string, match func(entry string) bool) {
	key := store.NewTeamKeys("").Audit(ws)
	msgs, err := r.Client.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		return
	}
	var ids []string
	for _, m := range msgs {
		if e, _ := m.Values["e"].(string); match(e) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) > 0 {
		r.Client.XDel(ctx, key, ids...)
	}
}

// forgetFlowAudit deletes what the audit log of flow's workspace (namespace "") says of
// the flow: its saves, runs, and so on (a server with SLUICE_TOKEN records them).
func forgetFlowAudit(ctx context.Context, r *store.Redis, flow string) {
	target := func(e string) bool {
		var a teams.AuditEntry
		// "FLOW", "FLOW/RUN", "FLOW@ENVIRONMENT" (a promotion)
		return json.Unmarshal([]byte(e), &a) == nil && (a.Target == flow || strings.HasPrefix(a.Target, flow+"/") || strings.HasPrefix(a.Target, flow+"@"))
	}
	forgetAudit(ctx, r, flows.WorkspaceOf(flow), target)
}
