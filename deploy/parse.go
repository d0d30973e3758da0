package deploy

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// ParsePools reads --pools values. A value is a list of pools separated by ':', a pool
// a list of node ids separated by ',' with an optional name: "coder,reviewer:sql" is
// two pools, named after their first nodes ("coder", "sql"); "agents=coder,reviewer"
// names the pool "agents". The flag may be given several times.
func ParsePools(values []string) ([]Pool, error) {
	var pools []Pool
	for _, v := range values {
		for _, spec := range strings.Split(v, ":") {
			spec = strings.TrimSpace(spec)
			if spec == "" {
				return nil, fmt.Errorf("--pools %q: an empty pool (two ':' in a row, or one at an end)", v)
			}
			var p Pool
			nodes := spec
			if name, rest, ok := strings.Cut(spec, "="); ok {
				p.Name, nodes = strings.TrimSpace(name), rest
				if !flows.ValidID(p.Name) {
					return nil, fmt.Errorf("--pools %q: pool name %q: want lower-case letters, digits, '-' and '_'", v, p.Name)
				}
			}
			seen := map[string]bool{}
			for _, n := range strings.Split(nodes, ",") {
				n = strings.TrimSpace(n)
				if !flows.ValidID(n) {
					return nil, fmt.Errorf("--pools %q: %q is not a node id", v, n)
				}
				if seen[n] {
					return nil, fmt.Errorf("--pools %q: node %q twice in one pool", v, n)
				}
				seen[n] = true
				p.Nodes = append(p.Nodes, n)
			}
			if p.Name == "" {
				p.Name = p.Nodes[0]
			}
			pools = append(pools, p)
		}
	}
	return pools, nil
}

// ParseRedis reads where KEDA finds the streams, in the forms Sluice's REDIS_URL takes:
//
//	redis://HOST[:PORT][/DB]                          one server (rediss:// with TLS)
//	redis+sentinel://HOST:PORT,HOST:PORT/MASTER[/DB]  Sentinel (port 26379 by default)
//	redis+cluster://HOST:PORT,HOST:PORT               a cluster's seed nodes
//
// cluster reads a redis:// address as a cluster's seeds. Credentials and options are
// refused: they belong in the Secret, not in manifests.
func ParseRedis(raw string, cluster bool) (Redis, error) {
	bad := func(format string, args ...any) (Redis, error) {
		return Redis{}, fmt.Errorf("--redis %q: %s", raw, fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return bad("want redis://HOST:PORT, redis+sentinel://HOST:PORT,.../MASTER or redis+cluster://HOST:PORT,...")
	}
	var r Redis
	base, plus, _ := strings.Cut(scheme, "+")
	switch base {
	case "redis":
	case "rediss":
		r.TLS = true
	default:
		return bad("unknown scheme %q", scheme)
	}
	defPort := "6379"
	switch plus {
	case "":
		r.Kind = RedisSingle
		if cluster {
			r.Kind = RedisCluster
		}
	case "sentinel":
		if cluster {
			return bad("--cluster with a Sentinel address")
		}
		r.Kind, defPort = RedisSentinel, "26379"
	case "cluster":
		r.Kind = RedisCluster
	default:
		return bad("unknown scheme %q", scheme)
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("options (?...) belong in the Secret's REDIS_URL; KEDA needs only the addresses")
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return bad("credentials belong in the Secret, not in manifests: give the address alone, and --redis-password-key for KEDA")
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return bad("an empty address")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, defPort)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return bad("address %q: want HOST:PORT", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("address %q: bad port", h)
		}
		r.Addrs = append(r.Addrs, h)
	}
	if r.Kind == RedisSingle && len(r.Addrs) > 1 {
		return bad("several addresses: a cluster is redis+cluster://, Sentinel redis+sentinel://")
	}
	var segs []string
	if path != "" {
		segs = strings.Split(path, "/")
	}
	if r.Kind == RedisSentinel {
		if len(segs) == 0 || segs[0] == "" {
			return bad("Sentinel needs the master's name: redis+sentinel://HOST:PORT,.../MASTER")
		}
		r.Master, segs = segs[0], segs[1:]
	}
	if len(segs) > 1 {
		return bad("unexpected path %q", path)
	}
	if len(segs) == 1 && segs[0] != "" {
		db, err := strconv.Atoi(segs[0])
		if err != nil || db < 0 {
			return bad("database %q: want a number", segs[0])
		}
		if r.Kind == RedisCluster && db != 0 {
			return bad("a cluster has database 0 only")
		}
		r.DB = db
	}
	return r, nil
}
