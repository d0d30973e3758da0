package flows

import (
	"fmt"
	"sort"
	"strings"
)

// graph is the control-flow graph of a document: nodes joined by state edges, plus the
// tool attachments. Only edges that passed checkEdges are in it.
type graph struct {
	ids   []string       // node ids in document order
	index map[string]int // node id -> document index
	out   map[string][]gEdge
	tools map[string][]string // agent -> attached tool nodes
	used  map[string]bool     // tool nodes attached to something
	specs map[string]*Spec
	// loose holds, per node, the targets of its edges that failed the port checks; only
	// reachable follows them.
	loose map[string][]string
}

type gEdge struct {
	edge int // index in doc.Edges
	from string
	port string
	to   string
	cond bool // taken only sometimes: it has a condition or leaves a routing node
}

func (c *checker) buildGraph(edges []int) *graph {
	g := &graph{index: c.nodeIndex, out: map[string][]gEdge{}, tools: map[string][]string{}, used: map[string]bool{}, specs: c.specs,
		loose: map[string][]string{}}
	for _, i := range c.loose {
		e := c.doc.Edges[i]
		g.loose[e.From] = append(g.loose[e.From], e.To)
	}
	for i, n := range c.doc.Nodes {
		if idx, ok := c.nodeIndex[n.ID]; ok && idx == i {
			g.ids = append(g.ids, n.ID)
		}
	}
	for _, i := range edges {
		e := c.doc.Edges[i]
		p, _ := findPort(c.ports[e.From], e.FromPort(), "out")
		if p.Type == PortTool {
			g.tools[e.To] = append(g.tools[e.To], e.From)
			g.used[e.From] = true
			continue
		}
		routing := c.specs[e.From] != nil && c.specs[e.From].Routing
		g.out[e.From] = append(g.out[e.From], gEdge{edge: i, from: e.From, port: e.FromPort(), to: e.To, cond: e.Condition != "" || routing})
	}
	return g
}

// reachable returns the nodes reachable from start over state edges and loose edges.
func (g *graph) reachable(start string) map[string]bool {
	seen := map[string]bool{}
	if start == "" {
		return seen
	}
	stack := []string{start}
	seen[start] = true
	visit := func(to string) {
		if !seen[to] {
			seen[to] = true
			stack = append(stack, to)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.out[n] {
			visit(e.to)
		}
		for _, to := range g.loose[n] {
			visit(to)
		}
	}
	return seen
}

// reachableAvoiding returns the nodes reachable from start by paths that do not pass
// through avoid (none when start is avoid).
func (g *graph) reachableAvoiding(start, avoid string) map[string]bool {
	seen := map[string]bool{}
	if start == avoid {
		return seen
	}
	seen[start] = true
	stack := []string{start}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.out[n] {
			if e.to != avoid && !seen[e.to] {
				seen[e.to] = true
				stack = append(stack, e.to)
			}
		}
	}
	return seen
}

// distances returns the BFS distance from start to every node it reaches.
func (g *graph) distances(start string) map[string]int {
	dist := map[string]int{start: 0}
	queue := []string{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range g.out[n] {
			if _, ok := dist[e.to]; !ok {
				dist[e.to] = dist[n] + 1
				queue = append(queue, e.to)
			}
		}
	}
	return dist
}

// sccs returns the strongly connected components that contain a cycle (more than one
// node, or one node with an edge to itself), each in document order.
func (g *graph) sccs() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var connect func(v string)
	connect = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range g.out[v] {
			if _, seen := index[e.to]; !seen {
				connect(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 || g.selfLoop(v) {
				sort.Slice(comp, func(i, j int) bool { return g.index[comp[i]] < g.index[comp[j]] })
				out = append(out, comp)
			}
		}
	}
	for _, id := range g.ids {
		if _, seen := index[id]; !seen {
			connect(id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return g.index[out[i][0]] < g.index[out[j][0]] })
	return out
}

func (g *graph) selfLoop(v string) bool {
	for _, e := range g.out[v] {
		if e.to == v {
			return true
		}
	}
	return false
}

// cyclePath returns one cycle through the first node of comp, as "a → b → a".
func (g *graph) cyclePath(comp []string) string {
	in := map[string]bool{}
	for _, n := range comp {
		in[n] = true
	}
	start := comp[0]
	prev := map[string]string{}
	queue := []string{start}
	seen := map[string]bool{start: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range g.out[n] {
			if !in[e.to] {
				continue
			}
			if e.to == start {
				path := []string{start}
				for x := n; x != start; x = prev[x] {
					path = append(path, x)
				}
				// path is start, n, ..., reversed except the first
				for i, j := 1, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return strings.Join(append(path, start), " → ")
			}
			if !seen[e.to] {
				seen[e.to] = true
				prev[e.to] = n
				queue = append(queue, e.to)
			}
		}
	}
	return strings.Join(comp, ", ")
}

// checkGraph reports unreachable nodes, loops that cannot end and forks whose branches
// cannot meet their join. It returns, for every node that may fork, the join where its
// branches meet ("" when they do not).
func (c *checker) checkGraph(g *graph, entry string) map[string]string {
	reach := g.reachable(entry)
	// Tools attached to a reachable node are reachable.
	for agent, tools := range g.tools {
		if reach[agent] {
			for _, t := range tools {
				reach[t] = true
			}
		}
	}
	if entry != "" {
		for _, id := range g.ids {
			if !reach[id] {
				c.nodeProblem(g.index[id], CodeUnreachable, "", "no path from the input node %q reaches this node, so it never runs", entry)
				c.probs[len(c.probs)-1].Severity = SeverityWarning
			}
		}
	}

	for _, comp := range g.sccs() {
		in := map[string]bool{}
		for _, n := range comp {
			in[n] = true
		}
		conditional, exit := false, false
		for _, n := range comp {
			for _, e := range g.out[n] {
				if in[e.to] && e.cond {
					conditional = true
				}
				if !in[e.to] {
					exit = true
				}
			}
		}
		if !conditional || !exit {
			why := "no edge in it is conditional"
			if conditional {
				why = "no edge leaves it"
			}
			c.nodeProblem(g.index[comp[0]], CodeCycleWithoutExit, "",
				"loop %s can never end: %s; give an edge a condition or route through a router, and give the loop a way out", g.cyclePath(comp), why)
		}
	}
	return c.checkForks(g)
}

// forks reports whether node n can start more than one branch in one step.
func (g *graph) forks(n string) bool {
	spec := g.specs[n]
	if spec != nil && spec.Fans {
		return true
	}
	edges := g.out[n]
	if spec != nil && spec.Routing {
		perPort := map[string]int{}
		for _, e := range edges {
			perPort[e.port]++
			if perPort[e.port] > 1 {
				return true
			}
		}
		return false
	}
	return len(edges) > 1
}

// branchEdges returns the edges that start the branches of fork n. A routing node takes
// one port per step, so only a port with several edges forks, and the edges of its
// other ports are never branches of the same fork.
func (g *graph) branchEdges(n string) []gEdge {
	if spec := g.specs[n]; spec == nil || !spec.Routing {
		return g.out[n]
	}
	perPort := map[string]int{}
	for _, e := range g.out[n] {
		perPort[e.port]++
	}
	var out []gEdge
	for _, e := range g.out[n] {
		if perPort[e.port] > 1 {
			out = append(out, e)
		}
	}
	return out
}

// checkForks finds each fork's join: the nearest join node that every branch can reach.
func (c *checker) checkForks(g *graph) map[string]string {
	joinOf := map[string]string{}
	owned := map[string]bool{}
	partly := map[string]string{} // join -> a fork some but not all of whose branches reach it
	for _, n := range g.ids {
		if !g.forks(n) {
			continue
		}
		var succ []string
		seen := map[string]bool{}
		for _, e := range g.branchEdges(n) {
			if !seen[e.to] {
				seen[e.to] = true
				succ = append(succ, e.to)
			}
		}
		if len(succ) == 0 {
			continue
		}
		dists := make([]map[string]int, len(succ))
		for i, s := range succ {
			dists[i] = g.distances(s)
		}
		best, bestD := "", 0
		for _, cand := range g.ids {
			if g.specs[cand] == nil || g.specs[cand].Name != JoinType || cand == n {
				continue
			}
			worst, all, any := 0, true, false
			for _, d := range dists {
				if x, ok := d[cand]; ok {
					any = true
					worst = max(worst, x)
				} else {
					all = false
				}
			}
			if all {
				if best == "" || worst < bestD {
					best, bestD = cand, worst
				}
			} else if any {
				if _, ok := partly[cand]; !ok {
					partly[cand] = n
				}
			}
		}
		joinOf[n] = best
		if best != "" {
			owned[best] = true
			continue
		}
		// Branches that meet somewhere other than a join run that node once per branch.
		// A path back through the fork node is the loop's next round, not a meeting:
		// a loop that leaves by one conditional edge and repeats by another is not a fork
		// whose branches meet.
		if len(succ) > 1 {
			own := make([]map[string]bool, len(succ))
			for i, s := range succ {
				own[i] = g.reachableAvoiding(s, n)
			}
			meet := ""
			for _, cand := range g.ids {
				if g.specs[cand] != nil && g.specs[cand].Name == JoinType {
					continue // a join some branches miss is reported on the join
				}
				hits := 0
				for _, r := range own {
					if r[cand] {
						hits++
					}
				}
				if hits > 1 {
					meet = cand
					break
				}
			}
			if meet != "" {
				c.nodeProblem(g.index[n], CodeMeetWithoutJoin, "", "the branches from this node meet at %q, which is not a join, so %q runs once per branch; put a join before it to merge them", meet, meet)
				c.probs[len(c.probs)-1].Severity = SeverityWarning
			}
		}
	}
	for _, id := range g.ids {
		if g.specs[id] == nil || g.specs[id].Name != JoinType || owned[id] {
			continue
		}
		if fork, ok := partly[id]; ok {
			c.nodeProblem(g.index[id], CodeJoinWithoutFork, "", "the branches of the fork at %q can never all meet here: some of them have no path to this join", fork)
			continue
		}
		c.nodeProblem(g.index[id], CodeJoinWithoutFork, "", "no fork's branches meet at this join, so it only passes the state on; connect the branches of a fork to it")
		c.probs[len(c.probs)-1].Severity = SeverityWarning
	}
	return joinOf
}

func (g *graph) String() string {
	var b strings.Builder
	for _, id := range g.ids {
		for _, e := range g.out[id] {
			fmt.Fprintf(&b, "%s -%s-> %s\n", id, e.port, e.to)
		}
	}
	return b.String()
}
