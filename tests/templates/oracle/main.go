// Command oracle renders the template corpus in tests/templates/cases.txt with
// the real Go text/template engine plus the sprig v3 function library
// (sprig.TxtFuncMap). Its output is the reference that our Rust
// implementation is compared against, byte for byte.
//
// Usage:
//
//	oracle CASES_FILE DATA_JSON
//	    Render every case, in file order, and print one JSON object per
//	    line on stdout:
//	        {"name": "...", "out": "..."}   rendering succeeded
//	        {"name": "...", "err": "..."}   parsing or executing failed
//	    "err" is Go's error message, verbatim.
//
//	oracle -bench N CASES_FILE DATA_JSON
//	    Parse every case once, drop the cases that fail (to parse or to
//	    execute), then execute all remaining cases N times, writing to
//	    io.Discard, and print
//	        {"cases": C, "iterations": N, "ns": TOTAL_NANOSECONDS}
//	    where C is the number of cases that were timed. Only the execute
//	    loop is timed.
//
// Case file format (see tests/templates/README.md):
//
//	### case-name
//	@data {"x": 1}              (optional: replaces the default data)
//	@option missingkey=error    (optional: default is missingkey=default)
//	template text, any number of lines
//
// The template is every line after the header/directives up to the next
// "### " header (or end of file), joined with "\n"; the newline that ends the
// last template line is not part of the template.
//
// Build (Debian packages golang-go + golang-github-masterminds-sprig-dev):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=/tmp/gocache \
//	    go build -o /tmp/tmpl-oracle ./tests/templates/oracle
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/sprig"
)

// testCase is one entry of the cases file.
type testCase struct {
	name     string
	data     string // raw JSON of the case's data; "" means the default data
	option   string // template option, e.g. "missingkey=default"
	template string
	line     int // line number of the "### " header, for diagnostics
}

// parseCases reads the cases file format described at the top of this file.
func parseCases(src string) ([]testCase, error) {
	// The file's final newline terminates the last line; it is not an extra
	// empty line. (Same rule as Rust's str::lines.)
	src = strings.TrimSuffix(src, "\n")
	lines := strings.Split(src, "\n")

	var cases []testCase
	seen := map[string]bool{}
	var cur *testCase
	var body []string
	inDirectives := false

	flush := func() {
		if cur != nil {
			cur.template = strings.Join(body, "\n")
			cases = append(cases, *cur)
		}
	}

	for i, line := range lines {
		if strings.HasPrefix(line, "### ") {
			flush()
			name := strings.TrimPrefix(line, "### ")
			if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
				return nil, fmt.Errorf("line %d: bad case name %q", i+1, name)
			}
			if seen[name] {
				return nil, fmt.Errorf("line %d: duplicate case name %q", i+1, name)
			}
			seen[name] = true
			cur = &testCase{name: name, option: "missingkey=default", line: i + 1}
			body = nil
			inDirectives = true
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: text before the first \"### \" header", i+1)
		}
		if inDirectives {
			switch {
			case strings.HasPrefix(line, "@data "):
				cur.data = strings.TrimPrefix(line, "@data ")
				continue
			case strings.HasPrefix(line, "@option "):
				opt := strings.TrimPrefix(line, "@option ")
				switch opt {
				case "missingkey=default", "missingkey=zero", "missingkey=error":
				default:
					return nil, fmt.Errorf("line %d: unsupported option %q", i+1, opt)
				}
				cur.option = opt
				continue
			}
			inDirectives = false
		}
		body = append(body, line)
	}
	flush()
	return cases, nil
}

// decodeData decodes a JSON object the way our platform's values arrive:
// plain encoding/json into map[string]interface{} (numbers are float64).
func decodeData(raw string) (map[string]interface{}, error) {
	var m map[string]interface{}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// required is Helm's `required`, which our platform adds to sprig because
// vendors' templates use it as Helm charts do: an error naming what is
// missing when the value is nil or an empty string.
func required(warn string, val interface{}) (interface{}, error) {
	if val == nil {
		return val, errors.New(warn)
	} else if s, ok := val.(string); ok && s == "" {
		return val, errors.New(warn)
	}
	return val, nil
}

// funcs is sprig's text function map plus Helm's `required`.
func funcs() template.FuncMap {
	m := sprig.TxtFuncMap()
	m["required"] = required
	return m
}

// parse builds the template for one case.
func parse(c testCase) (*template.Template, error) {
	return template.New(c.name).Funcs(funcs()).Option(c.option).Parse(c.template)
}

// render parses and executes one case. A panic that escapes text/template
// (it recovers most of them itself) is reported as an error, not a crash.
func render(c testCase, data map[string]interface{}) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	t, err := parse(c)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// caseData returns a freshly decoded copy of the case's data. Decoding per
// case matters: sprig's set/unset mutate maps in place, and one case must not
// leak into the next.
func caseData(c testCase, defaultJSON string) (map[string]interface{}, error) {
	raw := defaultJSON
	if c.data != "" {
		raw = c.data
	}
	return decodeData(raw)
}

type result struct {
	Name string  `json:"name"`
	Out  *string `json:"out,omitempty"`
	Err  *string `json:"err,omitempty"`
}

func main() {
	// Dates: sprig's date/toDate use the "Local" zone. Pin it to UTC so the
	// output does not depend on the machine's TZ.
	time.Local = time.UTC

	bench := flag.Int("bench", 0, "execute every case `N` times and print timing")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: oracle [-bench N] CASES_FILE DATA_JSON")
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	casesSrc, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fatal(err)
	}
	dataSrc, err := os.ReadFile(flag.Arg(1))
	if err != nil {
		fatal(err)
	}
	defaultJSON := string(dataSrc)
	if _, err := decodeData(defaultJSON); err != nil {
		fatal(fmt.Errorf("%s: %v", flag.Arg(1), err))
	}
	cases, err := parseCases(string(casesSrc))
	if err != nil {
		fatal(fmt.Errorf("%s: %v", flag.Arg(0), err))
	}

	if *bench > 0 {
		runBench(cases, defaultJSON, *bench)
		return
	}

	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false) // keep <, >, & readable; it is still valid JSON
	status := 0
	for _, c := range cases {
		data, err := caseData(c, defaultJSON)
		if err != nil {
			fatal(fmt.Errorf("case %s (line %d): bad @data: %v", c.name, c.line, err))
		}
		res := result{Name: c.name}
		out, err := render(c, data)
		if err != nil {
			msg := err.Error()
			res.Err = &msg
		} else {
			res.Out = &out
			// JSON strings cannot carry invalid UTF-8 (it would be replaced
			// by U+FFFD), so such output could not be compared byte for
			// byte. Flag it so the case gets fixed.
			if !utf8.ValidString(out) {
				fmt.Fprintf(os.Stderr, "oracle: case %s (line %d): output is not valid UTF-8\n", c.name, c.line)
				status = 1
			}
		}
		if err := enc.Encode(res); err != nil {
			fatal(err)
		}
	}
	os.Exit(status)
}

// runBench times N executions of every case that renders successfully.
func runBench(cases []testCase, defaultJSON string, n int) {
	type prepared struct {
		t    *template.Template
		data map[string]interface{}
	}
	var ready []prepared
	for _, c := range cases {
		data, err := caseData(c, defaultJSON)
		if err != nil {
			fatal(fmt.Errorf("case %s: bad @data: %v", c.name, err))
		}
		// Trial render (on its own copy of the data) to drop failing cases.
		if _, err := render(c, data); err != nil {
			continue
		}
		t, err := parse(c)
		if err != nil {
			continue
		}
		data, _ = caseData(c, defaultJSON)
		ready = append(ready, prepared{t, data})
	}

	start := time.Now()
	for i := 0; i < n; i++ {
		for _, p := range ready {
			// Errors cannot happen here (the trial render succeeded), but
			// don't let one abort the loop.
			_ = p.t.Execute(io.Discard, p.data)
		}
	}
	elapsed := time.Since(start)

	fmt.Fprintf(os.Stderr, "oracle: timed %d of %d cases (%d failing cases left out)\n", len(ready), len(cases), len(cases)-len(ready))

	fmt.Printf("{\"cases\": %d, \"iterations\": %d, \"ns\": %d}\n", len(ready), n, elapsed.Nanoseconds())
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "oracle:", err)
	os.Exit(2)
}
