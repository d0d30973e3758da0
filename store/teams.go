package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
)

// Teams keeps people, workspaces, members, API keys, sessions, password links and the
// audit log in Redis. What may be done with them is package teams' business.
type Teams struct {
	rdb  redis.UniversalClient
	keys TeamKeys
}

// Teams returns the team store of namespace ns ("" in production).
func (r *Redis) Teams(ns string) *Teams { return &Teams{rdb: r.Client, keys: NewTeamKeys(ns)} }

var errNoPerson = &flows.Error{Code: flows.NotFound, Message: "no such person"}

// createPersonScript adds a person unless the email is taken.
//
// KEYS[1] -> the emails hash
// KEYS[2] -> the people hash
// ARGV[1] -> the lower-cased email
// ARGV[2] -> the person id
// ARGV[3] -> the person (JSON)
// Returns 1, or 0 when the email is taken.
var createPersonScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1`)

// CreatePerson adds p (its ID is drawn when empty); an email already taken is a
// Conflict.
func (t *Teams) CreatePerson(ctx context.Context, p *teams.Person) error {
	p.Email = strings.ToLower(strings.TrimSpace(p.Email))
	if p.Email == "" || !strings.Contains(p.Email, "@") {
		return &flows.Error{Code: flows.Invalid, Path: "email", Message: "an email address is needed"}
	}
	if p.ID == "" {
		p.ID = "p_" + teams.RandomToken(9)
	}
	if p.Created == 0 {
		p.Created = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(p)
	ok, err := createPersonScript.Run(ctx, t.rdb, []string{t.keys.Emails(), t.keys.People()}, p.Email, p.ID, b).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return &flows.Error{Code: flows.Conflict, Path: "email", Message: "someone with this email address is already here"}
	}
	return nil
}

// SavePerson rewrites a person (its email stays).
func (t *Teams) SavePerson(ctx context.Context, p teams.Person) error {
	b, _ := json.Marshal(p)
	return t.rdb.HSet(ctx, t.keys.People(), p.ID, b).Err()
}

// Person returns a person by id.
func (t *Teams) Person(ctx context.Context, id string) (teams.Person, error) {
	var p teams.Person
	b, err := t.rdb.HGet(ctx, t.keys.People(), id).Bytes()
	if errors.Is(err, redis.Nil) {
		return p, errNoPerson
	}
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

// PersonByEmail returns a person by email.
func (t *Teams) PersonByEmail(ctx context.Context, email string) (teams.Person, error) {
	id, err := t.rdb.HGet(ctx, t.keys.Emails(), strings.ToLower(strings.TrimSpace(email))).Result()
	if errors.Is(err, redis.Nil) {
		return teams.Person{}, errNoPerson
	}
	if err != nil {
		return teams.Person{}, err
	}
	return t.Person(ctx, id)
}

// People returns everyone, by email.
func (t *Teams) People(ctx context.Context) ([]teams.Person, error) {
	m, err := t.rdb.HGetAll(ctx, t.keys.People()).Result()
	if err != nil {
		return nil, err
	}
	out := make([]teams.Person, 0, len(m))
	for _, v := range m {
		var p teams.Person
		if json.Unmarshal([]byte(v), &p) == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Email < out[j].Email })
	return out, nil
}

// HasPeople reports whether anyone has an account (the sign-in page is offered then).
func (t *Teams) HasPeople(ctx context.Context) (bool, error) {
	n, err := t.rdb.HLen(ctx, t.keys.People()).Result()
	return n > 0, err
}

// SaveWorkspace creates or rewrites a workspace.
func (t *Teams) SaveWorkspace(ctx context.Context, w teams.Workspace) error {
	if !teams.ValidWorkspace(w.ID) {
		return &flows.Error{Code: flows.Invalid, Path: "id", Message: fmt.Sprintf("workspace id %q: use lower-case letters, digits, '-' or '_'", w.ID)}
	}
	if w.Created == 0 {
		w.Created = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(w)
	return t.rdb.HSet(ctx, t.keys.Workspaces(), w.ID, b).Err()
}

// Workspaces returns every workspace by id; the default one is there even when never
// saved.
func (t *Teams) Workspaces(ctx context.Context) ([]teams.Workspace, error) {
	m, err := t.rdb.HGetAll(ctx, t.keys.Workspaces()).Result()
	if err != nil {
		return nil, err
	}
	out := []teams.Workspace{}
	if _, ok := m[teams.DefaultWorkspace]; !ok {
		out = append(out, teams.Workspace{ID: teams.DefaultWorkspace})
	}
	for _, v := range m {
		var w teams.Workspace
		if json.Unmarshal([]byte(v), &w) == nil {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SetRole makes person a member of ws with role; "" removes them.
func (t *Teams) SetRole(ctx context.Context, ws, person string, role teams.Role) error {
	if role == "" {
		return t.rdb.HDel(ctx, t.keys.Members(ws), person).Err()
	}
	return t.rdb.HSet(ctx, t.keys.Members(ws), person, string(role)).Err()
}

// Members returns a workspace's members' roles by person id.
func (t *Teams) Members(ctx context.Context, ws string) (map[string]teams.Role, error) {
	m, err := t.rdb.HGetAll(ctx, t.keys.Members(ws)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]teams.Role, len(m))
	for k, v := range m {
		out[k] = teams.Role(v)
	}
	return out, nil
}

// Roles returns a person's role in every workspace they are a member of.
func (t *Teams) Roles(ctx context.Context, person string, wss []teams.Workspace) (map[string]teams.Role, error) {
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(wss))
	for i, w := range wss {
		cmds[i] = pipe.HGet(ctx, t.keys.Members(w.ID), person)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := map[string]teams.Role{}
	for i, c := range cmds {
		if v, err := c.Result(); err == nil && v != "" {
			out[wss[i].ID] = teams.Role(v)
		}
	}
	return out, nil
}

// SaveKey stores an API key (its digest, never the key).
func (t *Teams) SaveKey(ctx context.Context, k teams.APIKey) error {
	b, _ := json.Marshal(k)
	return t.rdb.HSet(ctx, t.keys.APIKeys(), k.ID, b).Err()
}

// Key returns an API key by id, with its last use.
func (t *Teams) Key(ctx context.Context, id string) (teams.APIKey, error) {
	var k teams.APIKey
	pipe := t.rdb.Pipeline()
	kc := pipe.HGet(ctx, t.keys.APIKeys(), id)
	uc := pipe.HGet(ctx, t.keys.KeyUsed(), id)
	_, _ = pipe.Exec(ctx)
	b, err := kc.Bytes()
	if errors.Is(err, redis.Nil) {
		return k, &flows.Error{Code: flows.NotFound, Message: "no such key"}
	}
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, err
	}
	k.LastUsed, _ = uc.Int64()
	return k, nil
}

// Keys returns every API key (without digests), newest first.
func (t *Teams) Keys(ctx context.Context) ([]teams.APIKey, error) {
	pipe := t.rdb.Pipeline()
	kc := pipe.HGetAll(ctx, t.keys.APIKeys())
	uc := pipe.HGetAll(ctx, t.keys.KeyUsed())
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	used := uc.Val()
	var out []teams.APIKey
	for id, v := range kc.Val() {
		var k teams.APIKey
		if json.Unmarshal([]byte(v), &k) != nil {
			continue
		}
		k.Digest = ""
		k.LastUsed, _ = strconv.ParseInt(used[id], 10, 64)
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created > out[j].Created })
	return out, nil
}

// TouchKey records a key's use at ms.
func (t *Teams) TouchKey(ctx context.Context, id string, ms int64) error {
	return t.rdb.HSet(ctx, t.keys.KeyUsed(), id, ms).Err()
}

// CreateSession stores a session under the digest of its cookie for lifetime.
func (t *Teams) CreateSession(ctx context.Context, digest string, s teams.Session, lifetime time.Duration) error {
	b, _ := json.Marshal(s)
	pipe := t.rdb.TxPipeline()
	pipe.Set(ctx, t.keys.Session(digest), b, lifetime)
	pipe.SAdd(ctx, t.keys.PersonSessions(s.Person), digest)
	_, err := pipe.Exec(ctx)
	return err
}

// Session returns a session by digest; ok is false when there is none (expired or
// revoked).
func (t *Teams) Session(ctx context.Context, digest string) (s teams.Session, ok bool, err error) {
	b, err := t.rdb.Get(ctx, t.keys.Session(digest)).Bytes()
	if errors.Is(err, redis.Nil) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	return s, json.Unmarshal(b, &s) == nil, nil
}

// TouchSession records a session's last request, keeping its expiry.
func (t *Teams) TouchSession(ctx context.Context, digest string, s teams.Session) error {
	b, _ := json.Marshal(s)
	return t.rdb.Set(ctx, t.keys.Session(digest), b, redis.KeepTTL).Err()
}

// RevokeSession ends one session.
func (t *Teams) RevokeSession(ctx context.Context, digest, person string) error {
	pipe := t.rdb.TxPipeline()
	pipe.Del(ctx, t.keys.Session(digest))
	pipe.SRem(ctx, t.keys.PersonSessions(person), digest)
	_, err := pipe.Exec(ctx)
	return err
}

// RevokeSessions ends every session of a person (a password reset, a removal).
func (t *Teams) RevokeSessions(ctx context.Context, person string) error {
	ds, err := t.rdb.SMembers(ctx, t.keys.PersonSessions(person)).Result()
	if err != nil {
		return err
	}
	pipe := t.rdb.TxPipeline()
	for _, d := range ds {
		pipe.Del(ctx, t.keys.Session(d))
	}
	pipe.Del(ctx, t.keys.PersonSessions(person))
	_, err = pipe.Exec(ctx)
	return err
}

// CreateReset stores a one-time password link for person, valid for ttl.
func (t *Teams) CreateReset(ctx context.Context, digest, person string, ttl time.Duration) error {
	return t.rdb.Set(ctx, t.keys.Reset(digest), person, ttl).Err()
}

// TakeReset uses up a password link: the person it was for, or ok false when it is
// unknown, used or expired.
func (t *Teams) TakeReset(ctx context.Context, digest string) (person string, ok bool, err error) {
	p, err := t.rdb.GetDel(ctx, t.keys.Reset(digest)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return p, err == nil, err
}

// PeekReset reports whether a password link is still good, without using it.
func (t *Teams) PeekReset(ctx context.Context, digest string) (bool, error) {
	n, err := t.rdb.Exists(ctx, t.keys.Reset(digest)).Result()
	return n == 1, err
}

// Audit appends an entry to a workspace's audit log and drops entries older than
// retention. The log is append-only: nothing but retention removes an entry.
func (t *Teams) Audit(ctx context.Context, ws string, e teams.AuditEntry, retention time.Duration) error {
	b, _ := json.Marshal(e)
	minID := strconv.FormatInt(time.Now().Add(-retention).UnixMilli(), 10)
	return t.rdb.XAdd(ctx, &redis.XAddArgs{Stream: t.keys.Audit(ws), MinID: minID, Approx: true,
		Values: []any{"e", b}}).Err()
}

// AuditLog returns a workspace's audit entries from newest, at most n, older than
// before (a stream id; "" from the newest).
func (t *Teams) AuditLog(ctx context.Context, ws, before string, n int64) ([]teams.AuditEntry, error) {
	end := "+"
	if before != "" {
		end = "(" + before
	}
	msgs, err := t.rdb.XRevRangeN(ctx, t.keys.Audit(ws), end, "-", n).Result()
	if err != nil {
		return nil, err
	}
	out := make([]teams.AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		var e teams.AuditEntry
		s, _ := m.Values["e"].(string)
		if json.Unmarshal([]byte(s), &e) == nil {
			e.ID = m.ID
			if ms, _, ok := strings.Cut(m.ID, "-"); ok {
				e.At, _ = strconv.ParseInt(ms, 10, 64)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// WorkspaceRules is what each workspace's owner lets its flows read and call (the
// secrets and providers of its settings) as flows.WorkspaceRules, read from Redis at
// most once per ttl by each process: validation and the components that read secrets
// or call models ask it, and a change an owner makes applies everywhere within ttl.
type WorkspaceRules struct {
	t   *Teams
	ttl time.Duration

	mu     sync.Mutex
	rules  map[string]flows.WorkspaceRule
	loaded time.Time // when rules were read (or last tried, after a failure)
	gen    atomic.Uint64
}

// Rules returns the workspaces' rules of t, read again when older than ttl.
func (t *Teams) Rules(ttl time.Duration) *WorkspaceRules {
	if ttl <= 0 {
		ttl = time.Second
	}
	return &WorkspaceRules{t: t, ttl: ttl}
}

// Rule is workspace ws's rule; the zero rule for a workspace with no lists (or none).
func (w *WorkspaceRules) Rule(ws string) (flows.WorkspaceRule, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.fresh(); err != nil {
		return flows.WorkspaceRule{}, err
	}
	return w.rules[ws], nil
}

// Generation changes when a rule does.
func (w *WorkspaceRules) Generation() uint64 {
	w.mu.Lock()
	_ = w.fresh() // a failure keeps the generation: Rule reports it
	w.mu.Unlock()
	return w.gen.Load()
}

// Reload reads the rules now: after this process changed a workspace's settings.
func (w *WorkspaceRules) Reload(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.load(ctx)
}

// fresh reads the rules when they are older than ttl; w.mu is held. A failure keeps
// the rules read before (Redis away: steps fail anyway) and is tried again after ttl;
// with none read yet, it is the answer.
func (w *WorkspaceRules) fresh() error {
	if time.Since(w.loaded) < w.ttl {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := w.load(ctx)
	if err != nil && w.rules != nil {
		w.loaded = time.Now()
		return nil
	}
	return err
}

func (w *WorkspaceRules) load(ctx context.Context) error {
	wss, err := w.t.Workspaces(ctx)
	if err != nil {
		return err
	}
	rules := make(map[string]flows.WorkspaceRule, len(wss))
	for _, ws := range wss {
		if ws.Secrets != nil || ws.Providers != nil {
			rules[ws.ID] = flows.WorkspaceRule{Secrets: ws.Secrets, Providers: ws.Providers}
		}
	}
	if w.rules == nil || !reflect.DeepEqual(rules, w.rules) {
		w.gen.Add(1)
	}
	w.rules, w.loaded = rules, time.Now()
	return nil
}

var _ flows.WorkspaceRules = (*WorkspaceRules)(nil)
