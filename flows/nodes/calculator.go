package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/flows"
)

func calculatorSpec() flows.Spec {
	return flows.Spec{
		Name:     "calculator",
		Title:    "Calculator",
		Category: "tools",
		Description: "Evaluates arithmetic safely — numbers, + - * / % ^, parentheses and the functions sqrt, abs, round, " +
			"floor, ceil, min, max, ln, log10, exp, sin, cos, tan, with the constants pi and e — with a small parser of its " +
			"own: nothing else can run. Sums, differences, products and quotients of decimals are exact (0.1 + 0.2 is " +
			"0.3); the functions and fractional powers work in float64. As a step the expression is a template over the " +
			"node's input and the number is stored under \"as\"; attached to an agent's tools port the model passes the " +
			"expression. A malformed expression, a division by zero or a result too large fails for good (as a tool: the " +
			"model is told).",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"expression": {"type": "string", "format": "template", "description": "The arithmetic, a template over the node's input, e.g. {{.price}} * {{.quantity}} * 1.2"},
				"decimals": {"type": "integer", "minimum": 0, "maximum": 30, "description": "Round the result to this many decimals; left out, exact results are kept whole and others have up to 15 significant digits."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "result", "description": "State key the number is stored under (as a step)."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"expression": "{{.subtotal}} * (1 + {{.vat_rate}})", "decimals": 2, "as": "total"}`),
		New:     newCalculator,
	}
}

// Calculator evaluates arithmetic.
type Calculator struct {
	expr     *flows.Template
	decimals *int
	as       string
	def      flows.ToolDef
}

var calculatorToolArgs = json.RawMessage(`{"type": "object", "required": ["expression"], "additionalProperties": false,
	"properties": {"expression": {"type": "string", "description": "Arithmetic such as (1200 - 150) * 0.2 or sqrt(2) ^ 3; functions sqrt, abs, round, floor, ceil, min, max, ln, log10, exp, sin, cos, tan; constants pi, e."}}}`)

func newCalculator(b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Expression string `json:"expression"`
		Decimals   *int   `json:"decimals"`
		As         string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	c := &Calculator{decimals: p.Decimals, as: p.As}
	if p.Expression != "" {
		t, err := flows.ParseTemplate(p.Expression)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.expression", Err: err}
		}
		c.expr = t
	}
	p.ToolParameters = nil
	c.def = p.def(b, "Evaluate arithmetic exactly instead of working it out yourself.", calculatorToolArgs)
	return c, nil
}

// Run evaluates the rendered expression.
func (c *Calculator) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if c.expr == nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.expression",
			Message: "a calculator step needs an expression; without one the node only works as an agent's tool"})
	}
	src, err := c.expr.Execute(ctx, s.Input)
	if err != nil {
		return nil, templateError(s.Node, "params.expression", err)
	}
	v, err := c.eval(src)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.expression", Message: fmt.Sprintf("%q: %v", src, err)})
	}
	return &flows.Result{Output: v, Update: map[string]any{c.as: v}}, nil
}

// ToolDef offers the calculator to a model.
func (c *Calculator) ToolDef() flows.ToolDef { return c.def }

// Call evaluates the model's expression.
func (c *Calculator) Call(_ context.Context, _ *flows.Step, args json.RawMessage) (any, error) {
	var a struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Expression) == "" {
		return nil, fmt.Errorf(`call it with {"expression": "2 * (3 + 4)"}`)
	}
	v, err := c.eval(a.Expression)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", a.Expression, err)
	}
	return map[string]any{"expression": a.Expression, "result": v}, nil
}

// eval parses and evaluates src, and writes the result as a JSON number.
func (c *Calculator) eval(src string) (json.Number, error) {
	v, err := evaluate(src)
	if err != nil {
		return "", err
	}
	return v.number(c.decimals)
}

// The calculator's language: a recursive-descent parser over
//
//	expr   = term { ("+" | "-") term }
//	term   = power { ("*" | "/" | "%") power }
//	power  = unary [ "^" power ]            (right-associative: 2^3^2 is 2^9)
//	unary  = ("-" | "+") unary | call
//	call   = NAME "(" expr { "," expr } ")" | NAME | NUMBER | "(" expr ")"
//
// Numbers are exact rationals (math/big) until a function or a fractional power needs a
// float64. Inputs are bounded (length, nesting, exponent, size of the numbers), so no
// expression can hold a worker.
const (
	maxExprLen   = 4096
	maxExprDepth = 64
	maxExponent  = 4096
	maxBits      = 1 << 16 // numbers beyond 2^65536 are refused
)

// calcValue is a number: exact (rat) or approximate (f).
type calcValue struct {
	rat *big.Rat
	f   float64
}

func exact(r *big.Rat) calcValue { return calcValue{rat: r} }

func (v calcValue) float() float64 {
	if v.rat != nil {
		f, _ := v.rat.Float64()
		return f
	}
	return v.f
}

func (v calcValue) isZero() bool {
	if v.rat != nil {
		return v.rat.Sign() == 0
	}
	return v.f == 0
}

// number writes v: an exact value whole when it has a finite decimal form (else 15
// significant digits), rounded to decimals when given.
func (v calcValue) number(decimals *int) (json.Number, error) {
	if v.rat == nil {
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return "", errors.New("the result is not a finite number")
		}
		if decimals != nil {
			p := math.Pow(10, float64(*decimals))
			return json.Number(trimZeros(fmt.Sprintf("%.*f", *decimals, math.Round(v.f*p)/p))), nil
		}
		return json.Number(trimZeros(fmt.Sprintf("%.15g", v.f))), nil
	}
	if decimals != nil {
		return json.Number(trimZeros(roundRat(v.rat, *decimals))), nil
	}
	if v.rat.IsInt() {
		return json.Number(v.rat.Num().String()), nil
	}
	if d, ok := finiteDecimal(v.rat); ok {
		return json.Number(d), nil
	}
	f, _ := v.rat.Float64()
	return json.Number(trimZeros(fmt.Sprintf("%.15g", f))), nil
}

// finiteDecimal writes r exactly when its denominator has no prime factors but 2 and 5.
func finiteDecimal(r *big.Rat) (string, bool) {
	d := new(big.Int).Set(r.Denom())
	two, five, zero := big.NewInt(2), big.NewInt(5), new(big.Int)
	places := 0
	for _, p := range []*big.Int{two, five} {
		n := 0
		for new(big.Int).Mod(d, p).Cmp(zero) == 0 {
			d.Div(d, p)
			n++
		}
		places = max(places, n)
	}
	if d.Cmp(big.NewInt(1)) != 0 || places > 60 {
		return "", false
	}
	return trimZeros(r.FloatString(places)), true
}

// roundRat rounds r half away from zero to decimals places.
func roundRat(r *big.Rat, decimals int) string {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	half := big.NewRat(1, 2)
	if x.Sign() < 0 {
		x.Sub(x, half)
	} else {
		x.Add(x, half)
	}
	q := new(big.Int).Quo(x.Num(), x.Denom()) // truncates towards zero
	return new(big.Rat).SetFrac(q, scale).FloatString(decimals)
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") || strings.ContainsAny(s, "eE") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

type calcParser struct {
	src   []rune
	pos   int
	depth int
}

func evaluate(src string) (calcValue, error) {
	if len(src) > maxExprLen {
		return calcValue{}, fmt.Errorf("the expression is longer than %d characters", maxExprLen)
	}
	p := &calcParser{src: []rune(src)}
	v, err := p.expr()
	if err != nil {
		return calcValue{}, err
	}
	p.space()
	if p.pos < len(p.src) {
		return calcValue{}, p.errorf("unexpected %q", string(p.src[p.pos]))
	}
	return v, nil
}

func (p *calcParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at character %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *calcParser) space() {
	for p.pos < len(p.src) && unicode.IsSpace(p.src[p.pos]) {
		p.pos++
	}
}

// peek returns the next character after white space (0 at the end).
func (p *calcParser) peek() rune {
	p.space()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *calcParser) enter() error {
	p.depth++
	if p.depth > maxExprDepth {
		return p.errorf("the expression nests more than %d deep", maxExprDepth)
	}
	return nil
}

func (p *calcParser) expr() (calcValue, error) {
	if err := p.enter(); err != nil {
		return calcValue{}, err
	}
	defer func() { p.depth-- }()
	v, err := p.term()
	if err != nil {
		return v, err
	}
	for {
		switch op := p.peek(); op {
		case '+', '-':
			p.pos++
			w, err := p.term()
			if err != nil {
				return w, err
			}
			if v, err = arith(op, v, w); err != nil {
				return v, p.errorf("%v", err)
			}
		default:
			return v, nil
		}
	}
}

func (p *calcParser) term() (calcValue, error) {
	v, err := p.power()
	if err != nil {
		return v, err
	}
	for {
		switch op := p.peek(); op {
		case '*', '/', '%', '×', '÷':
			p.pos++
			w, err := p.power()
			if err != nil {
				return w, err
			}
			if v, err = arith(op, v, w); err != nil {
				return v, p.errorf("%v", err)
			}
		default:
			return v, nil
		}
	}
}

func (p *calcParser) power() (calcValue, error) {
	base, err := p.unary()
	if err != nil {
		return base, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	p.pos++
	if err := p.enter(); err != nil {
		return calcValue{}, err
	}
	exp, err := p.power()
	p.depth--
	if err != nil {
		return exp, err
	}
	v, err := pow(base, exp)
	if err != nil {
		return v, p.errorf("%v", err)
	}
	return v, nil
}

func (p *calcParser) unary() (calcValue, error) {
	switch p.peek() {
	case '-', '−':
		p.pos++
		if err := p.enter(); err != nil {
			return calcValue{}, err
		}
		defer func() { p.depth-- }()
		v, err := p.unary()
		if err != nil {
			return v, err
		}
		if v.rat != nil {
			return exact(new(big.Rat).Neg(v.rat)), nil
		}
		return calcValue{f: -v.f}, nil
	case '+':
		p.pos++
		return p.unary()
	}
	return p.primary()
}

func (p *calcParser) primary() (calcValue, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.pos++
		v, err := p.expr()
		if err != nil {
			return v, err
		}
		if p.peek() != ')' {
			return v, p.errorf("a ( is not closed")
		}
		p.pos++
		return v, nil
	case unicode.IsDigit(c) || c == '.':
		return p.number()
	case unicode.IsLetter(c):
		start := p.pos
		for p.pos < len(p.src) && (unicode.IsLetter(p.src[p.pos]) || unicode.IsDigit(p.src[p.pos])) {
			p.pos++
		}
		name := strings.ToLower(string(p.src[start:p.pos]))
		if p.peek() != '(' {
			switch name {
			case "pi":
				return calcValue{f: math.Pi}, nil
			case "e":
				return calcValue{f: math.E}, nil
			}
			p.pos = start
			return calcValue{}, p.errorf("unknown name %q (the constants are pi and e)", name)
		}
		p.pos++
		var args []calcValue
		if p.peek() != ')' {
			for {
				a, err := p.expr()
				if err != nil {
					return a, err
				}
				args = append(args, a)
				if p.peek() != ',' {
					break
				}
				p.pos++
			}
		}
		if p.peek() != ')' {
			return calcValue{}, p.errorf("%s( is not closed", name)
		}
		p.pos++
		v, err := call(name, args)
		if err != nil {
			return v, p.errorf("%v", err)
		}
		return v, nil
	case c == 0:
		return calcValue{}, p.errorf("the expression ends too early")
	}
	return calcValue{}, p.errorf("unexpected %q", string(c))
}

// number reads a decimal, with an optional exponent (1.5e3) and thousands separators
// never (1,000 would be two arguments).
func (p *calcParser) number() (calcValue, error) {
	start := p.pos
	digits := func() {
		for p.pos < len(p.src) && (unicode.IsDigit(p.src[p.pos]) || p.src[p.pos] == '_') {
			p.pos++
		}
	}
	digits()
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		digits()
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		save := p.pos
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if p.pos < len(p.src) && unicode.IsDigit(p.src[p.pos]) {
			digits()
		} else {
			p.pos = save
		}
	}
	text := strings.ReplaceAll(string(p.src[start:p.pos]), "_", "")
	if strings.ContainsAny(text, "eE") {
		_, exp, _ := strings.Cut(strings.ToLower(text), "e")
		if len(strings.TrimLeft(exp, "+-0")) > 4 {
			return calcValue{}, p.errorf("the number %s is too large", text)
		}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		p.pos = start
		return calcValue{}, p.errorf("%q is not a number", text)
	}
	if r.Num().BitLen() > maxBits || r.Denom().BitLen() > maxBits {
		return calcValue{}, p.errorf("the number %s is too large", text)
	}
	return exact(r), nil
}

func checkSize(v calcValue) (calcValue, error) {
	if v.rat != nil && (v.rat.Num().BitLen() > maxBits || v.rat.Denom().BitLen() > maxBits) {
		return v, errors.New("the result is too large")
	}
	if v.rat == nil && (math.IsInf(v.f, 0) || math.IsNaN(v.f)) {
		return v, errors.New("the result is not a finite number")
	}
	return v, nil
}

func arith(op rune, a, b calcValue) (calcValue, error) {
	if (op == '/' || op == '÷' || op == '%') && b.isZero() {
		return calcValue{}, errors.New("division by zero")
	}
	if a.rat != nil && b.rat != nil {
		r := new(big.Rat)
		switch op {
		case '+':
			r.Add(a.rat, b.rat)
		case '-':
			r.Sub(a.rat, b.rat)
		case '*', '×':
			r.Mul(a.rat, b.rat)
		case '/', '÷':
			r.Quo(a.rat, b.rat)
		case '%':
			// a - b*trunc(a/b): the sign of a, as in most languages.
			q := new(big.Rat).Quo(a.rat, b.rat)
			t := new(big.Int).Quo(q.Num(), q.Denom())
			r.Sub(a.rat, new(big.Rat).Mul(b.rat, new(big.Rat).SetInt(t)))
		}
		return checkSize(exact(r))
	}
	x, y := a.float(), b.float()
	var f float64
	switch op {
	case '+':
		f = x + y
	case '-':
		f = x - y
	case '*', '×':
		f = x * y
	case '/', '÷':
		f = x / y
	case '%':
		f = math.Mod(x, y)
	}
	return checkSize(calcValue{f: f})
}

func pow(base, exp calcValue) (calcValue, error) {
	if base.rat != nil && exp.rat != nil && exp.rat.IsInt() {
		n := exp.rat.Num()
		if n.CmpAbs(big.NewInt(maxExponent)) > 0 {
			return calcValue{}, fmt.Errorf("an exponent beyond ±%d", maxExponent)
		}
		e := n.Int64()
		if base.rat.Sign() == 0 && e < 0 {
			return calcValue{}, errors.New("division by zero")
		}
		// The result's size is the base's times the exponent: refuse it before computing.
		if int64(max(base.rat.Num().BitLen(), base.rat.Denom().BitLen()))*abs64(e) > maxBits {
			return calcValue{}, errors.New("the result is too large")
		}
		num := new(big.Int).Exp(base.rat.Num(), big.NewInt(abs64(e)), nil)
		den := new(big.Int).Exp(base.rat.Denom(), big.NewInt(abs64(e)), nil)
		if e < 0 {
			num, den = den, num
		}
		return checkSize(exact(new(big.Rat).SetFrac(num, den)))
	}
	return checkSize(calcValue{f: math.Pow(base.float(), exp.float())})
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func call(name string, args []calcValue) (calcValue, error) {
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d argument(s), not %d", name, n, len(args))
		}
		return nil
	}
	one := func(fn func(float64) float64) (calcValue, error) {
		if err := want(1); err != nil {
			return calcValue{}, err
		}
		return checkSize(calcValue{f: fn(args[0].float())})
	}
	switch name {
	case "sqrt":
		if len(args) == 1 && args[0].float() < 0 {
			return calcValue{}, errors.New("the square root of a negative number")
		}
		return one(math.Sqrt)
	case "abs":
		if err := want(1); err != nil {
			return calcValue{}, err
		}
		if args[0].rat != nil {
			return exact(new(big.Rat).Abs(args[0].rat)), nil
		}
		return calcValue{f: math.Abs(args[0].f)}, nil
	case "round", "floor", "ceil":
		if err := want(1); err != nil {
			return calcValue{}, err
		}
		if r := args[0].rat; r != nil {
			q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // floor division (Euclidean for a positive denominator)
			switch {
			case name == "ceil" && m.Sign() != 0:
				q.Add(q, big.NewInt(1))
			case name == "round":
				// half away from zero: compare twice the remainder with the denominator
				twice := new(big.Int).Mul(m, big.NewInt(2))
				c := twice.Cmp(r.Denom())
				if c > 0 || (c == 0 && r.Sign() > 0) {
					q.Add(q, big.NewInt(1))
				}
			}
			return exact(new(big.Rat).SetInt(q)), nil
		}
		fn := map[string]func(float64) float64{"round": math.Round, "floor": math.Floor, "ceil": math.Ceil}[name]
		return calcValue{f: fn(args[0].f)}, nil
	case "min", "max":
		if len(args) == 0 {
			return calcValue{}, fmt.Errorf("%s takes at least one argument", name)
		}
		best := args[0]
		for _, a := range args[1:] {
			var less bool
			if a.rat != nil && best.rat != nil {
				less = a.rat.Cmp(best.rat) < 0
			} else {
				less = a.float() < best.float()
			}
			if less == (name == "min") {
				best = a
			}
		}
		return best, nil
	case "ln":
		return one(math.Log)
	case "log10", "log":
		return one(math.Log10)
	case "exp":
		return one(math.Exp)
	case "sin":
		return one(math.Sin)
	case "cos":
		return one(math.Cos)
	case "tan":
		return one(math.Tan)
	}
	return calcValue{}, fmt.Errorf("unknown function %s (there are sqrt, abs, round, floor, ceil, min, max, ln, log10, exp, sin, cos, tan)", name)
}

var (
	_ flows.Component = (*Calculator)(nil)
	_ flows.Tool      = (*Calculator)(nil)
)
