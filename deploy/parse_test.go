package deploy

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePools(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		want   []Pool
		err    string
	}{
		{"a pool is named after its first node", []string{"coder,reviewer:sql"},
			[]Pool{{"coder", []string{"coder", "reviewer"}}, {"sql", []string{"sql"}}}, ""},
		{"a pool can be named", []string{"agents=coder,reviewer", "db=sql"},
			[]Pool{{"agents", []string{"coder", "reviewer"}}, {"db", []string{"sql"}}}, ""},
		{"spaces around ids are dropped", []string{" coder , sql "}, []Pool{{"coder", []string{"coder", "sql"}}}, ""},
		{"an empty pool is refused", []string{"coder::sql"}, nil, "an empty pool"},
		{"a bad node id is refused", []string{"Coder"}, nil, `"Coder" is not a node id`},
		{"a bad pool name is refused", []string{"My Pool=coder"}, nil, `pool name "My Pool"`},
		{"a node twice in a pool is refused", []string{"coder,coder"}, nil, `node "coder" twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePools(c.values)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestParseRedis(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		cluster bool
		want    Redis
		err     string
	}{
		{"one server with a database", "redis://redis:6380/3", false, Redis{Kind: RedisSingle, Addrs: []string{"redis:6380"}, DB: 3}, ""},
		{"the default port", "redis://redis", false, Redis{Kind: RedisSingle, Addrs: []string{"redis:6379"}}, ""},
		{"TLS", "rediss://redis:6379", false, Redis{Kind: RedisSingle, Addrs: []string{"redis:6379"}, TLS: true}, ""},
		{"Sentinel with a master and a database", "redis+sentinel://s0:26379,s1/mymaster/2", false,
			Redis{Kind: RedisSentinel, Addrs: []string{"s0:26379", "s1:26379"}, Master: "mymaster", DB: 2}, ""},
		{"a cluster's seeds", "redis+cluster://r0:7000,r1:7001,r2:7002", false,
			Redis{Kind: RedisCluster, Addrs: []string{"r0:7000", "r1:7001", "r2:7002"}}, ""},
		{"--cluster makes redis:// seeds", "redis://r0:7000", true, Redis{Kind: RedisCluster, Addrs: []string{"r0:7000"}}, ""},
		{"IPv6", "redis://[::1]:6379", false, Redis{Kind: RedisSingle, Addrs: []string{"[::1]:6379"}}, ""},
		{"credentials are refused", "redis://user:pw@redis:6379", false, Redis{}, "credentials belong in the Secret"},
		{"options are refused", "redis://redis:6379?dial_timeout=1s", false, Redis{}, "options"},
		{"several addresses need a cluster or Sentinel", "redis://a:1,b:2", false, Redis{}, "several addresses"},
		{"Sentinel needs a master", "redis+sentinel://s0:26379/", false, Redis{}, "master's name"},
		{"a cluster has database 0 only", "redis+cluster://r0:7000/1", false, Redis{}, "database 0 only"},
		{"--cluster with Sentinel is refused", "redis+sentinel://s0/m", true, Redis{}, "--cluster with a Sentinel"},
		{"an unknown scheme is refused", "memcached://m:11211", false, Redis{}, "unknown scheme"},
		{"a bad port is refused", "redis://redis:99999", false, Redis{}, "bad port"},
		{"no scheme is refused", "redis:6379", false, Redis{}, "want redis://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRedis(c.raw, c.cluster)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
