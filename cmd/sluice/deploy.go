package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/deploy"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func cmdDeploy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pools stringList
	fs.Var(&pools, "pools", "worker pools: node ids joined by ',', pools by ':', each optionally NAME=... (\"agents=coder,reviewer:sql\"); may be repeated; nodes in no pool form the pool \"default\"")
	image := fs.String("image", "sluice:latest", "the container image of Sluice (build it with the repository's Dockerfile and push it)")
	redisAddr := fs.String("redis", "redis://redis:6379", "where KEDA reads the streams, without credentials: redis://HOST:PORT[/DB], rediss://..., redis+sentinel://HOST:PORT,.../MASTER[/DB] or redis+cluster://HOST:PORT,...")
	cluster := fs.Bool("cluster", false, "the Redis is a cluster (redis-cluster-streams triggers); implied by redis+cluster://")
	partitions := fs.Int("partitions", 0, "partitions of the flows that set none in settings.partitions (0: on a cluster, as many as spread evenly over --masters, else 1); the processes get it as SLUICE_PARTITIONS")
	masters := fs.Int("masters", 0, "the cluster's masters, for the default --partitions (0: 16 partitions, even on 2 to 5 masters)")
	urlSecret := fs.String("redis-url-secret", "sluice-redis", "the Secret whose key \"url\" holds REDIS_URL")
	passwordKey := fs.String("redis-password-key", "", "the key of --redis-url-secret that holds the Redis password, for KEDA (empty: KEDA connects without one)")
	tokenSecret := fs.String("token-secret", "sluice-token", "the Secret whose key \"token\" holds the API's bearer token")
	name := fs.String("name", "sluice", "prefix of the objects' names")
	namespace := fs.String("namespace", "", "namespace written into every object (empty: none, kubectl's current one)")
	minReplicas := fs.Int("min-replicas", 1, "fewest worker replicas of a pool; 0 lets KEDA scale an idle pool to zero")
	maxReplicas := fs.Int("max-replicas", 10, "most worker replicas of a pool")
	perReplica := fs.Int("steps-per-replica", flows.DefaultConcurrency, "steps (waiting or running) one worker replica is sized for")
	scaleOn := fs.String("scale-on", deploy.ScaleOnLag, "what KEDA counts per stream: lag (the group's lag plus its pending entries; Redis 7) or length (the stream's length: the same sum, one trigger per stream, no group needed); see docs/deploy.md")
	metricsPort := fs.Int("metrics-port", 9090, "the workers' port for /metrics, /healthz and /readyz")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice deploy kubernetes [flags] FLOW.json...

Prints Kubernetes manifests for the flows: a ConfigMap of the flow files, a Deployment
and Service for 'sluice serve', and per worker pool a Deployment running
'sluice worker --nodes ...' with probes on /healthz and /readyz, and a KEDA
ScaledObject that scales it on its nodes' streams (every partition, group "sluice").
The flows are checked as 'sluice validate' does; a flow with errors writes nothing.
See docs/deploy.md.

Flags:
`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || (args[0] != "kubernetes" && !strings.HasPrefix(args[0], "-")) {
		fs.Usage()
		if len(args) == 0 {
			return &exitError{code: 2, err: errors.New("deploy: say what for: sluice deploy kubernetes FLOW.json [FLOW.json ...]")}
		}
		return &exitError{code: 2, err: fmt.Errorf("deploy: unknown target %q; there is kubernetes", args[0])}
	}
	if args[0] == "kubernetes" {
		args = args[1:]
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: fmt.Errorf("deploy: %v", err)}
	}
	if len(files) == 0 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("deploy: give at least one flow file")}
	}
	usage := func(err error) error { return &exitError{code: 2, err: fmt.Errorf("deploy: %v", err)} }
	ps, err := deploy.ParsePools(pools)
	if err != nil {
		return usage(err)
	}
	rd, err := deploy.ParseRedis(*redisAddr, *cluster)
	if err != nil {
		return usage(err)
	}
	if *partitions < 0 {
		return usage(errors.New("--partitions must be 0 or more"))
	}
	if *masters < 0 {
		return usage(errors.New("--masters must be 0 or more"))
	}
	if *partitions == 0 {
		*partitions = 1
		if rd.Kind == deploy.RedisCluster {
			// What the runtime would choose on the cluster (engine.New): the manifests
			// pin it for every process, so that triggers and runtime agree.
			*partitions = engine.ClusterPartitions
			if *masters > 0 {
				*partitions = store.PartitionsForMasters(*masters, engine.ClusterPartitions)
			}
		}
	}

	env, err := cf.env(nil)
	if err != nil {
		return err
	}
	defer env.Close()
	fl, err := loadDeployFlows(files, registry(env), stderr)
	if err != nil {
		return err
	}
	out, err := deploy.Kubernetes(deploy.Options{
		Flows: fl, Pools: ps, Redis: rd, Partitions: *partitions,
		Image: *image, Name: *name, Namespace: *namespace,
		RedisURLSecret: *urlSecret, RedisPasswordKey: *passwordKey, TokenSecret: *tokenSecret,
		MinReplicas: *minReplicas, MaxReplicas: *maxReplicas, StepsPerReplica: *perReplica, ScaleOn: *scaleOn,
		MetricsPort: *metricsPort, Version: version,
		Warn: func(msg string) { fmt.Fprintln(stderr, "deploy: "+msg) },
	})
	if err != nil {
		return usage(err)
	}
	_, err = stdout.Write(out)
	return err
}

// loadDeployFlows reads and checks flow files as `sluice validate` does, printing every
// problem; any error refuses them all.
func loadDeployFlows(files []string, reg *flows.Registry, stderr io.Writer) ([]deploy.Flow, error) {
	var out []deploy.Flow
	bad := 0
	for _, name := range files {
		data, err := readFlowFile(name)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("deploy: %v", err)}
		}
		label := name
		if name == "-" {
			label = stdinName
		}
		probs := flows.Validate(data, reg, flows.DefaultLimits)
		for _, p := range probs {
			fmt.Fprintf(stderr, "%s: %s\n", label, p)
		}
		if probs.HasErrors() {
			bad++
			continue
		}
		plan, probs := flows.Compile(data, reg, flows.DefaultLimits)
		if plan == nil {
			for _, p := range probs.Errors() {
				fmt.Fprintf(stderr, "%s: %s\n", label, p)
			}
			bad++
			continue
		}
		out = append(out, deploy.Flow{ID: plan.Flow, Nodes: plan.NodeIDs(), Partitions: plan.Settings.Partitions, Source: data})
	}
	if bad > 0 {
		return nil, &exitError{code: 1, err: fmt.Errorf("deploy: %s with errors; nothing written", plural(bad, "flow file"))}
	}
	return out, nil
}
