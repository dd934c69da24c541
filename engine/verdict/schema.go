package verdict

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/message"
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
// does not conform: the one check that case files, candidates' outputs and the calls of an
// admitted capability (engine/invoke) all get.
func Validate(schema string, v any) error { return validate(schema, v) }

// validate checks a decoded value (numbers as json.Number) against a schema text and
// returns a one-line reason when it does not conform.
func validate(text string, v any) error {
	s, err := schemaFor(text)
	if err != nil {
		return fmt.Errorf("schema does not compile: %v", err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			pruneCauses(ve)
			exactBounds(ve)
		}
		return fmt.Errorf("%s", oneLine(err.Error()))
	}
	return nil
}

// maxCauses is how many causes of each error are kept for its message: more than its
// maxShown bytes can show.
const maxCauses = 16

// pruneCauses keeps the first maxCauses causes at each level of e. A value with a million
// invalid items has a million causes; formatting them all would cost time and memory out
// of all proportion to the message, which shows a few.
func pruneCauses(e *jsonschema.ValidationError) {
	if len(e.Causes) > maxCauses {
		e.Causes = e.Causes[:maxCauses]
	}
	for _, c := range e.Causes {
		pruneCauses(c)
	}
}

// exactBounds makes the validator's messages about bounds exact. It prints numeric bounds
// as doubles, so "maximum: got 9.223372036854776×10¹⁸, want 9.223372036854776×10¹⁸" says
// nothing about 9223372036854775808 against 9223372036854775807, and counts with digit
// grouping ("maxItems: got 10,001, want 10,000"), which is not how a JSON number is written.
func exactBounds(e *jsonschema.ValidationError) {
	var got, want string
	switch k := e.ErrorKind.(type) {
	case *kind.Minimum:
		got, want = ratText(k.Got), ratText(k.Want)
	case *kind.Maximum:
		got, want = ratText(k.Got), ratText(k.Want)
	case *kind.ExclusiveMinimum:
		got, want = ratText(k.Got), ratText(k.Want)
	case *kind.ExclusiveMaximum:
		got, want = ratText(k.Got), ratText(k.Want)
	case *kind.MultipleOf:
		got, want = ratText(k.Got), ratText(k.Want)
	case *kind.MinItems:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MaxItems:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MinLength:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MaxLength:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MinProperties:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MaxProperties:
		got, want = strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	}
	if got != "" && want != "" {
		e.ErrorKind = exactBound{ErrorKind: e.ErrorKind, got: got, want: want}
	}
	for _, c := range e.Causes {
		exactBounds(c)
	}
}

// ratText is a number exactly when it is an integer, and "" (the validator's own
// rendering) when it is a fraction.
func ratText(r *big.Rat) string {
	if r == nil || !r.IsInt() {
		return ""
	}
	return r.Num().String()
}

// exactBound is a bound's error with its numbers as written.
type exactBound struct {
	jsonschema.ErrorKind
	got, want string
}

func (b exactBound) LocalizedString(*message.Printer) string {
	return fmt.Sprintf("%s: got %s, want %s", strings.Join(b.KeywordPath(), "/"), b.got, b.want)
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
