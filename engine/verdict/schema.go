package verdict

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas caches compiled schemas by their canonical text. A capability is an immutable
// value and its schemas are canonical JSON, so equal text means an equal schema: each is
// compiled once per process, however many cases and candidates are judged. The cache only
// grows; a project has few distinct schemas.
var schemas = struct {
	sync.Mutex
	m map[string]*compiled
}{m: map[string]*compiled{}}

type compiled struct {
	once sync.Once
	s    *jsonschema.Schema
	err  error
}

// refuseLoader refuses every external $ref, as lang does when it first compiles a schema:
// a schema's meaning is fixed by its own bytes.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q: schemas must be self-contained", url)
}

// schemaFor returns the compiled form of a schema text (Draft 2020-12 unless it says otherwise).
func schemaFor(text string) (*jsonschema.Schema, error) {
	schemas.Lock()
	c := schemas.m[text]
	if c == nil {
		c = &compiled{}
		schemas.m[text] = c
	}
	schemas.Unlock()
	c.once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
		if err != nil {
			c.err = err
			return
		}
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		comp.UseLoader(refuseLoader{})
		const loc = "foundry:///schema.json"
		if err := comp.AddResource(loc, doc); err != nil {
			c.err = err
			return
		}
		c.s, c.err = comp.Compile(loc)
	})
	return c.s, c.err
}

// Validate checks a value decoded by DecodeJSON against a contract's schema text (as
// lang.CompileSchema keeps it) and returns the validator's causes, on one line, when it
// does not conform: the check case files, candidates' outputs and calls of an admitted
// capability (engine/invoke) all get.
func Validate(schema string, v any) error { return validate(schema, v) }

// validate checks a decoded value (numbers as json.Number) against a schema text and
// returns a one-line reason when it does not conform.
func validate(text string, v any) error {
	s, err := schemaFor(text)
	if err != nil {
		return fmt.Errorf("schema does not compile: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s", oneLine(err.Error()))
	}
	return nil
}

// oneLine condenses the validator's indented multi-line report: the first line only names
// the schema, so the causes are kept, joined by "; ".
func oneLine(msg string) string {
	lines := strings.Split(msg, "\n")
	if len(lines) > 1 {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	return short(strings.Join(lines, "; "), maxShown)
}
